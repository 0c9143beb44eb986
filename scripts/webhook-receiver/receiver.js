// A test webhook receiver for Parley's control/webhooks tests: an HTTPS server on 127.0.0.1
// that verifies every delivery with the reference Standard Webhooks library (npm
// standardwebhooks), not with Parley's own code.
//
//   node receiver.js <cert.pem> <key.pem>
//
// It prints "listening <port>", then one JSON line per request on stdout:
//   {"path", "id", "timestamp", "signatures", "verified", "error", "type", "status", "at"}
// The test drives it with JSON lines on stdin, one per path:
//   {"path": "/a", "secrets": ["whsec_…"], "statuses": [500, 503], "retryAfter": "2"}
// A request to a path verifies when any of its secrets verifies it; it is answered 401 when
// none does, else the next of its statuses (then 200), with Retry-After when set.
"use strict";
const fs = require("fs");
const https = require("https");
const readline = require("readline");
const { Webhook } = require("standardwebhooks");

const [cert, key] = process.argv.slice(2);
const paths = new Map();

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (!line.trim()) return;
  const cfg = JSON.parse(line);
  paths.set(cfg.path, { secrets: cfg.secrets || [], statuses: cfg.statuses || [], retryAfter: cfg.retryAfter || "" });
  process.stdout.write(JSON.stringify({ configured: cfg.path }) + "\n");
});

const server = https.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) }, (req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const cfg = paths.get(req.url) || { secrets: [], statuses: [], retryAfter: "" };
    let verified = false;
    let error = "";
    let type = "";
    for (const s of cfg.secrets) {
      try {
        const msg = new Webhook(s).verify(body, req.headers);
        verified = true;
        type = msg.type;
        break;
      } catch (e) {
        error = e.message;
      }
    }
    let status = 401;
    if (verified) {
      error = "";
      status = cfg.statuses.length ? cfg.statuses.shift() : 200;
    }
    if (cfg.retryAfter && (status === 429 || status === 503)) res.setHeader("Retry-After", cfg.retryAfter);
    res.statusCode = status;
    res.end(verified ? "ok" : "signature not verified: " + error);
    process.stdout.write(JSON.stringify({
      path: req.url, id: req.headers["webhook-id"] || "", timestamp: req.headers["webhook-timestamp"] || "",
      signatures: (req.headers["webhook-signature"] || "").split(" ").filter(Boolean).length,
      verified, error, type, status, at: Date.now(),
    }) + "\n");
  });
});
server.keepAliveTimeout = 30000;
server.listen(0, "127.0.0.1", () => process.stdout.write("listening " + server.address().port + "\n"));
