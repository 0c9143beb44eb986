package webrtc

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// wsQueue bounds the messages waiting for one WebSocket; a page that does not read them is cut
// off rather than queued for without limit.
const wsQueue = 64

// wsWriteWait bounds one write to the socket.
const wsWriteWait = 5 * time.Second

// wsConn is one signalling WebSocket. gorilla/websocket allows one writer at a time, so every
// message goes through a bounded queue to the connection's own writer goroutine; Send never
// waits. The reader is the HTTP handler's goroutine.
type wsConn struct {
	c     *websocket.Conn
	out   chan []byte
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	close *websocket.CloseError // the close frame to send when the queue is flushed
}

func newWSConn(c *websocket.Conn) *wsConn {
	w := &wsConn{c: c, out: make(chan []byte, wsQueue), stop: make(chan struct{}), done: make(chan struct{})}
	c.SetReadLimit(maxMessageBytes)
	go w.writer()
	return w
}

// Send queues m; when the queue is full the connection is closed (the page reconnects).
func (w *wsConn) Send(m message) {
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	select {
	case <-w.stop:
	case w.out <- b:
	default:
		w.CloseWith(websocket.CloseTryAgainLater, "too slow")
	}
}

// CloseWith flushes what is queued, sends a close frame with code and text and closes.
func (w *wsConn) CloseWith(code int, text string) {
	w.mu.Lock()
	if w.close == nil {
		w.close = &websocket.CloseError{Code: code, Text: text}
	}
	w.mu.Unlock()
	w.once.Do(func() { close(w.stop) })
}

// Close closes the connection (normal closure) and waits for the writer.
func (w *wsConn) Close() {
	w.CloseWith(websocket.CloseNormalClosure, "")
	<-w.done
}

// Done is closed when the writer has finished and the socket is closed.
func (w *wsConn) Done() <-chan struct{} { return w.done }

func (w *wsConn) writer() {
	defer close(w.done)
	defer w.c.Close()
	write := func(b []byte) bool {
		_ = w.c.SetWriteDeadline(time.Now().Add(wsWriteWait))
		return w.c.WriteMessage(websocket.TextMessage, b) == nil
	}
	for {
		select {
		case b := <-w.out:
			if !write(b) {
				return
			}
		case <-w.stop:
			for {
				select {
				case b := <-w.out:
					if !write(b) {
						return
					}
					continue
				default:
				}
				break
			}
			w.mu.Lock()
			ce := w.close
			w.mu.Unlock()
			_ = w.c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(ce.Code, ce.Text), time.Now().Add(time.Second))
			return
		}
	}
}
