// Package crawler walks a customer's website for a knowledge base (issue 16): breadth first
// from a start page, within the allowed domains or URL prefixes and a depth, up to a page
// limit, honouring robots.txt (temoto/robotstxt) and sitemaps, with conditional requests
// (If-None-Match, If-Modified-Since) for pages fetched before.
//
// Every request goes through the HTTP client it is given, which must be the SSRF guard's
// (internal/netguard): it checks each address at dial time and follows no redirect, so the
// crawler follows redirects itself, a few hops at most and only within bounds. A page larger
// than MaxPageBytes, a redirect loop and a site of endless links are all bounded. The package
// must never make a client of its own.
package crawler

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/temoto/robotstxt"
	"golang.org/x/net/html"

	"github.com/parley-voice/parley/control/app/knowledge"
)

// Bounds of a crawl.
const (
	MaxPageBytes   = 5 << 20 // a larger page is failed, not read on
	MaxRedirects   = 5
	maxSitemapURLs = 10000
	maxRobotsBytes = 512 << 10
	// UserAgent names the crawler to sites and is the robots.txt group it obeys.
	UserAgent = "ParleyBot"
)

// Crawler fetches through Client (the SSRF guard's).
type Crawler struct {
	Client *http.Client
	// PageTimeout bounds one request (default 20 s).
	PageTimeout time.Duration
}

var _ knowledge.Crawler = (*Crawler)(nil)

type item struct {
	url   string
	depth int
}

// run is the state of one crawl.
type run struct {
	c      *Crawler
	spec   knowledge.CrawlSpec
	robots map[string]*robotstxt.Group // by scheme://host
	files  map[string]*robotstxt.RobotsData
	seen   map[string]bool
	queue  []item
}

// Crawl walks spec's site and calls visit for every page fetched, failed or gone. It returns an
// error only when the crawl cannot go on (visit failed, ctx ended); a page's failure is the
// page's.
func (c *Crawler) Crawl(ctx context.Context, spec knowledge.CrawlSpec, visit func(ctx context.Context, p knowledge.FetchedPage) error) error {
	if c.Client == nil {
		return errors.New("crawler: no HTTP client")
	}
	start, err := normalize(spec.Start, nil)
	if err != nil {
		return fmt.Errorf("crawler: start address: %w", err)
	}
	r := &run{c: c, spec: spec, robots: map[string]*robotstxt.Group{}, files: map[string]*robotstxt.RobotsData{}, seen: map[string]bool{}}
	r.push(start, 0)
	for _, s := range r.sitemaps(ctx, start) {
		r.push(s, 1)
	}
	fetched := 0
	for len(r.queue) > 0 && fetched < max(spec.MaxPages, 1) {
		if err := ctx.Err(); err != nil {
			return err
		}
		it := r.queue[0]
		r.queue = r.queue[1:]
		if !r.allowedByRobots(ctx, it.url) {
			continue
		}
		fetched++
		p, links := r.fetch(ctx, it)
		if err := visit(ctx, p); err != nil {
			return err
		}
		if it.depth < spec.MaxDepth {
			for _, l := range links {
				r.push(l, it.depth+1)
			}
		}
	}
	return nil
}

// push queues u once when it is within bounds.
func (r *run) push(u string, depth int) {
	if r.seen[u] || !r.inBounds(u) {
		return
	}
	r.seen[u] = true
	r.queue = append(r.queue, item{u, depth})
}

// inBounds reports whether u is under an allowed domain or prefix.
func (r *run) inBounds(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	host := strings.ToLower(u.Hostname())
	for _, a := range r.spec.Allowed {
		if strings.Contains(a, "://") {
			if strings.HasPrefix(strings.ToLower(raw), a) {
				return true
			}
			continue
		}
		if host == a || strings.HasSuffix(host, "."+a) {
			return true
		}
	}
	return false
}

// normalize resolves ref against base and drops the fragment.
func normalize(ref string, base *url.URL) (string, error) {
	u, err := url.Parse(strings.TrimSpace(ref))
	if err != nil {
		return "", err
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) address", ref)
	}
	u.Fragment = ""
	u.RawFragment = ""
	u.Host = strings.ToLower(u.Host)
	if u.Path == "" {
		u.Path = "/"
	}
	return u.String(), nil
}

func (r *run) get(ctx context.Context, u string, hdr http.Header) (*http.Response, error) {
	t := r.c.PageTimeout
	if t <= 0 {
		t = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", UserAgent+"/1.0 (+knowledge base crawler)")
	resp, err := r.c.Client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error { err := c.ReadCloser.Close(); c.cancel(); return err }

// readBounded reads at most limit bytes; a longer body is an error.
func readBounded(rc io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("the page is larger than %d MB", limit>>20)
	}
	return b, nil
}

// fetch gets one page, following redirects within bounds, and returns it with its links.
func (r *run) fetch(ctx context.Context, it item) (knowledge.FetchedPage, []string) {
	p := knowledge.FetchedPage{URL: it.url, Depth: it.depth}
	hdr := http.Header{}
	if r.spec.Known != nil {
		if etag, lm := r.spec.Known(it.url); etag != "" || lm != "" {
			if etag != "" {
				hdr.Set("If-None-Match", etag)
			}
			if lm != "" {
				hdr.Set("If-Modified-Since", lm)
			}
		}
	}
	cur := it.url
	visited := map[string]bool{cur: true}
	for hop := 0; ; hop++ {
		resp, err := r.get(ctx, cur, hdr)
		if err != nil {
			p.Err = fmt.Errorf("The page could not be fetched: %v", err)
			return p, nil
		}
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.StatusCode != http.StatusNotModified:
			resp.Body.Close()
			loc := resp.Header.Get("Location")
			next, err := normalize(loc, resp.Request.URL)
			switch {
			case err != nil:
				p.Err = fmt.Errorf("The page redirects to %q, which is not an http(s) address", loc)
			case visited[next]:
				p.Err = fmt.Errorf("The page redirects in a loop (back to %s)", next)
			case hop+1 >= MaxRedirects:
				p.Err = fmt.Errorf("The page redirects more than %d times", MaxRedirects)
			case !r.inBounds(next):
				p.Err = fmt.Errorf("The page redirects to %s, outside the crawl's allowed domains", next)
			}
			if p.Err != nil {
				return p, nil
			}
			visited[next] = true
			cur = next
			continue
		case resp.StatusCode == http.StatusNotModified:
			resp.Body.Close()
			p.NotModified = true
			p.ETag, p.LastModified = hdr.Get("If-None-Match"), hdr.Get("If-Modified-Since")
			if e := resp.Header.Get("ETag"); e != "" {
				p.ETag = e
			}
			return p, nil
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
			resp.Body.Close()
			p.Gone = true
			return p, nil
		case resp.StatusCode != http.StatusOK:
			resp.Body.Close()
			p.Err = fmt.Errorf("The page answered HTTP %d", resp.StatusCode)
			return p, nil
		}
		if resp.ContentLength > MaxPageBytes {
			resp.Body.Close()
			p.Err = fmt.Errorf("The page is larger than %d MB", MaxPageBytes>>20)
			return p, nil
		}
		body, err := readBounded(resp.Body, MaxPageBytes)
		resp.Body.Close()
		if err != nil {
			p.Err = fmt.Errorf("The page could not be read: %v", err)
			return p, nil
		}
		p.Body, p.ContentType = body, resp.Header.Get("Content-Type")
		p.ETag, p.LastModified = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
		var links []string
		if strings.Contains(strings.ToLower(p.ContentType), "html") {
			links = extractLinks(body, resp.Request.URL)
		}
		return p, links
	}
}

// extractLinks returns the http(s) links of an HTML page (a elements' href, resolved against
// the page and its base element), without rel=nofollow.
func extractLinks(body []byte, page *url.URL) []string {
	z := html.NewTokenizer(bytes.NewReader(body))
	base := page
	var out []string
	for {
		switch z.Next() {
		case html.ErrorToken:
			return out
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			if (tag != "a" && tag != "base") || !hasAttr {
				continue
			}
			var href, rel string
			for more := true; more; {
				var k, v []byte
				k, v, more = z.TagAttr()
				switch string(k) {
				case "href":
					href = string(v)
				case "rel":
					rel = strings.ToLower(string(v))
				}
			}
			if tag == "base" {
				if b, err := page.Parse(href); err == nil {
					base = b
				}
				continue
			}
			if href == "" || strings.Contains(rel, "nofollow") {
				continue
			}
			if u, err := normalize(href, base); err == nil {
				out = append(out, u)
			}
		}
	}
}

// allowedByRobots reads the host's robots.txt once (a missing one allows everything; one that
// cannot be fetched allows everything but is not retried) and tests u against it.
func (r *run) allowedByRobots(ctx context.Context, raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	g := r.robotsFor(ctx, u)
	return g == nil || g.Test(u.RequestURI())
}

func (r *run) robotsFor(ctx context.Context, u *url.URL) *robotstxt.Group {
	origin := u.Scheme + "://" + u.Host
	if g, ok := r.robots[origin]; ok {
		return g
	}
	r.robots[origin] = nil
	data, ok := r.robotsData(ctx, origin)
	if !ok {
		return nil
	}
	g := data.FindGroup(UserAgent)
	r.robots[origin] = g
	return g
}

// robotsData fetches and parses the origin's robots.txt once.
func (r *run) robotsData(ctx context.Context, origin string) (*robotstxt.RobotsData, bool) {
	if d, ok := r.files[origin]; ok {
		return d, d != nil
	}
	r.files[origin] = nil
	resp, err := r.get(ctx, origin+"/robots.txt", nil)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	body, err := readBounded(resp.Body, maxRobotsBytes)
	if err != nil {
		return nil, false
	}
	data, err := robotstxt.FromStatusAndBytes(resp.StatusCode, body)
	if err != nil {
		return nil, false
	}
	r.files[origin] = data
	return data, true
}

// sitemaps returns the pages the start host's sitemaps list: those named in robots.txt, else
// /sitemap.xml; a sitemap index is followed one level.
func (r *run) sitemaps(ctx context.Context, start string) []string {
	u, err := url.Parse(start)
	if err != nil {
		return nil
	}
	origin := u.Scheme + "://" + u.Host
	var maps []string
	if data, ok := r.robotsData(ctx, origin); ok {
		maps = append(maps, data.Sitemaps...)
	}
	if len(maps) == 0 {
		maps = []string{origin + "/sitemap.xml"}
	}
	var out []string
	for depth := 0; depth < 2 && len(maps) > 0; depth++ {
		var next []string
		for _, m := range maps {
			if !r.inBounds(m) {
				continue
			}
			locs, index := r.sitemap(ctx, m)
			if index {
				next = append(next, locs...)
				continue
			}
			out = append(out, locs...)
			if len(out) >= maxSitemapURLs {
				return out[:maxSitemapURLs]
			}
		}
		maps = next
	}
	return out
}

// sitemap reads one sitemap (sitemaps.org protocol): the pages of a urlset, or the sitemaps of
// a sitemap index (index true).
func (r *run) sitemap(ctx context.Context, m string) ([]string, bool) {
	resp, err := r.get(ctx, m, nil)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, false
	}
	body, err := readBounded(resp.Body, MaxPageBytes)
	if err != nil {
		return nil, false
	}
	var doc struct {
		XMLName xml.Name
		URLs    []struct {
			Loc string `xml:"loc"`
		} `xml:"url"`
		Maps []struct {
			Loc string `xml:"loc"`
		} `xml:"sitemap"`
	}
	if xml.Unmarshal(body, &doc) != nil {
		return nil, false
	}
	var out []string
	for _, s := range doc.Maps {
		if n, err := normalize(s.Loc, nil); err == nil {
			out = append(out, n)
		}
	}
	if doc.XMLName.Local == "sitemapindex" {
		return out, true
	}
	for _, s := range doc.URLs {
		if n, err := normalize(s.Loc, nil); err == nil {
			out = append(out, n)
		}
	}
	return out, false
}
