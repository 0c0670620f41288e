package redistier

// The RESP length scanner: what the reply guard (guard.go) runs over every
// byte a connection reads, before go-redis sees it.
//
// go-redis allocates what a reply declares before it reads the payload: a
// bulk string "$<n>\r\n" becomes make([]byte, n+2), an array "*<n>\r\n"
// make([]interface{}, n), a map make(map, n), and a nested array recurses
// once per level. A server that declares 10^11 bytes kills the client
// (fatal out of memory, which no recover catches) after sending 15 bytes.
// The scanner follows the RESP2 and RESP3 framing far enough to know, at
// each header, how much the reply it belongs to has declared so far, and
// refuses the header that takes a reply past its limit: the guard hands
// go-redis the bytes before that header's line feed and then an error, so
// go-redis never holds a complete line that declares too much.
//
// What a reply declares: a bulk string, blob error, verbatim string or
// streamed-string chunk its length; an aggregate elemCost bytes per
// element (a map or attribute two per pair: go-redis's interface{} slots);
// every line its own length. The count starts again at each top-level
// reply (a push message is one); an attribute belongs to the reply that
// follows it. Nesting is bounded by maxDepth, since go-redis recurses per
// level on the goroutine's stack. The scanner is stricter than RESP only
// where the framing could not be followed otherwise: an unknown type byte,
// a length that is not a number, "." or ";" outside a streamed aggregate or
// string.

import (
	"errors"
	"fmt"
	"math"
)

const (
	// elemCost is what one aggregate element declares: the 16 bytes of
	// the interface{} slot go-redis allocates for it up front.
	elemCost = 16
	// maxDepth bounds aggregate nesting. Redis's own replies nest a few
	// levels (CLUSTER SLOTS, XREAD, COMMAND DOCS stay under 10); go-redis
	// parses each level in a recursive call, and a million levels would
	// exhaust the goroutine's stack, which is as fatal as the heap.
	maxDepth = 128
	// maxHeaderLen bounds the line of a length header: a type byte, a sign
	// and up to 19 digits of an int64, with room for "\r".
	maxHeaderLen = 24
)

// ErrReplyTooLarge reports a reply that the reply guard refused: it
// declared more bytes than the limit (Options.MaxEntryBytes, at least
// MinReplyLimit), nested deeper than the guard follows, or was not RESP.
// The connection that carried it is unusable afterwards; go-redis closes
// it. A lookup that meets it is a counted miss (Stats.Oversized), and the
// entry is removed if it is still over the cap.
var ErrReplyTooLarge = errors.New("redistier: reply refused by the reply guard")

// frame is one aggregate being read.
type frame struct {
	left     int64 // elements still to come; -1 for a streamed aggregate
	element  bool  // the aggregate is an element of its parent (not an attribute)
	streamed byte  // '$' for a streamed string, '*' for a streamed aggregate, 0 otherwise
}

// respScanner follows a RESP stream. The zero value expects the start of a
// reply; limit must be set before use.
//
// Locking: none. It serves one connection's reads, which go-redis makes
// from one goroutine at a time.
type respScanner struct {
	limit int64 // what one top-level reply may declare

	used    int64   // declared so far by the current top-level reply
	stack   []frame // open aggregates, innermost last
	payload int64   // bytes of a bulk payload still to skip, its CRLF included
	inLine  bool    // inside a line (after its type byte, before its '\n')
	kind    byte    // the type byte of the line being read
	lineLen int64   // bytes of the line so far, its type byte included
	hdr     [maxHeaderLen]byte
	hdrLen  int
}

// scan follows p, the next bytes of the stream. It returns len(p) and nil,
// or the number of bytes before the line feed of the first header it
// refuses and an error wrapping ErrReplyTooLarge. After an error the
// scanner's state is undefined: the stream must not be used again.
func (s *respScanner) scan(p []byte) (int, error) {
	i := 0
	for i < len(p) {
		if s.payload > 0 {
			skip := int64(len(p) - i)
			if skip > s.payload {
				skip = s.payload
			}
			s.payload -= skip
			i += int(skip)
			if s.payload == 0 {
				if top := s.top(); top == nil || top.streamed != '$' {
					s.elementDone() // a chunk is not an element
				}
			}
			continue
		}
		if !s.inLine {
			if err := s.start(p[i]); err != nil {
				return i, err
			}
			i++
			continue
		}
		// Inside a line: find its end.
		j := i
		for j < len(p) && p[j] != '\n' {
			j++
		}
		n := int64(j - i)
		if s.isHeader() {
			if s.hdrLen+int(n) > len(s.hdr) {
				return i + len(s.hdr) - s.hdrLen, s.refuse("%q header longer than %d bytes", s.kind, maxHeaderLen)
			}
			s.hdrLen += copy(s.hdr[s.hdrLen:], p[i:j])
		} else if room := s.limit - s.used - s.lineLen; n > room {
			// A status or error line that does not end: go-redis grows a
			// buffer for it until it does.
			return i + int(max(room, 0)), s.refuse("a %q line of more than %d bytes", s.kind, s.limit-s.used)
		}
		s.lineLen += n
		if j == len(p) {
			return len(p), nil
		}
		// p[j] is the line feed.
		s.inLine = false
		if err := s.lineDone(); err != nil {
			return j, err
		}
		i = j + 1
	}
	return len(p), nil
}

// start begins a line whose type byte is c.
func (s *respScanner) start(c byte) error {
	switch c {
	case '+', '-', ':', '_', ',', '#', '(', '.', '$', '!', '=', ';', '*', '~', '%', '|', '>':
	default:
		return s.refuse("unknown reply type %q", c)
	}
	top := s.top()
	switch {
	case top != nil && top.streamed == '$' && c != ';':
		return s.refuse("a %q reply inside a streamed string", c)
	case c == ';' && (top == nil || top.streamed != '$'):
		return s.refuse("a streamed-string chunk outside a streamed string")
	case c == '.' && (top == nil || top.streamed != '*'):
		return s.refuse("the end of a streamed aggregate outside one")
	case top != nil && top.streamed == '*' && c != '.':
		// An element of a streamed aggregate, counted as it starts.
		if err := s.declare(elemCost); err != nil {
			return err
		}
	}
	s.inLine, s.kind, s.lineLen, s.hdrLen = true, c, 1, 0
	return nil
}

// isHeader reports whether the line being read is a length header.
func (s *respScanner) isHeader() bool {
	switch s.kind {
	case '$', '!', '=', ';', '*', '~', '%', '|', '>':
		return true
	}
	return false
}

// lineDone handles the line just read (without its line feed).
func (s *respScanner) lineDone() error {
	if err := s.declare(s.lineLen + 1); err != nil {
		return err
	}
	if !s.isHeader() {
		if s.kind == '.' {
			top := s.stack[len(s.stack)-1] // start checked it is streamed
			s.stack = s.stack[:len(s.stack)-1]
			if !top.element {
				return nil
			}
		}
		s.elementDone()
		return nil
	}
	h := s.hdr[:s.hdrLen]
	if len(h) > 0 && h[len(h)-1] == '\r' {
		h = h[:len(h)-1]
	}
	if string(h) == "?" {
		return s.openStreamed()
	}
	n, ok := parseLen(h)
	if !ok {
		return s.refuse("%q header with length %q", s.kind, h)
	}
	if s.kind == ';' { // start checked it is inside a streamed string
		if n < 0 {
			return s.refuse("streamed-string chunk of length %d", n)
		}
		if n == 0 { // the last chunk
			s.stack = s.stack[:len(s.stack)-1]
			s.elementDone()
			return nil
		}
		if err := s.declare(n); err != nil {
			return err
		}
		s.payload = n + 2
		return nil
	}
	if n == -1 { // a RESP2 null
		if s.kind == '|' {
			return s.refuse("attribute of length -1")
		}
		s.elementDone()
		return nil
	}
	switch s.kind {
	case '$', '!', '=':
		if err := s.declare(n); err != nil {
			return err
		}
		s.payload = n + 2
		return nil
	}
	// An aggregate of n elements, or of n pairs.
	count := n
	if s.kind == '%' || s.kind == '|' {
		if count > math.MaxInt64/2 {
			return s.refuse("%q header of %d pairs", s.kind, n)
		}
		count *= 2
	}
	if count > math.MaxInt64/elemCost {
		return s.refuse("%q header of %d elements", s.kind, n)
	}
	if err := s.declare(count * elemCost); err != nil {
		return err
	}
	if count == 0 {
		if s.kind != '|' {
			s.elementDone()
		}
		return nil
	}
	return s.push(frame{left: count, element: s.kind != '|'})
}

// openStreamed opens a streamed string ("$?") or aggregate ("*?" and the
// like).
func (s *respScanner) openStreamed() error {
	switch s.kind {
	case '$':
		return s.push(frame{left: -1, element: true, streamed: '$'})
	case '*', '~', '%', '|', '>':
		return s.push(frame{left: -1, element: s.kind != '|', streamed: '*'})
	}
	return s.refuse("%q header of unknown length", s.kind)
}

func (s *respScanner) push(f frame) error {
	if len(s.stack) >= maxDepth {
		return s.refuse("aggregates nested more than %d deep", maxDepth)
	}
	s.stack = append(s.stack, f)
	return nil
}

func (s *respScanner) top() *frame {
	if len(s.stack) == 0 {
		return nil
	}
	return &s.stack[len(s.stack)-1]
}

// elementDone records that an element (or a whole reply) ended.
func (s *respScanner) elementDone() {
	for {
		top := s.top()
		switch {
		case top == nil:
			s.used = 0 // a top-level reply ended
			return
		case top.streamed != 0:
			// A streamed aggregate (start counted the element); a
			// streamed string holds only chunks, which are not elements.
			return
		}
		top.left--
		if top.left > 0 {
			return
		}
		s.stack = s.stack[:len(s.stack)-1]
		if !top.element {
			// An attribute ended: the reply it annotates comes next.
			return
		}
	}
}

// declare adds n bytes to what the current reply declared.
func (s *respScanner) declare(n int64) error {
	if n > s.limit-s.used {
		return s.refuse("a reply that declares more than %d bytes", s.limit)
	}
	s.used += n
	return nil
}

func (s *respScanner) refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrReplyTooLarge, fmt.Sprintf(format, args...))
}

// parseLen parses a RESP length: -1 or a decimal of at most 18 digits
// (what an int64 holds without overflow checks).
func parseLen(b []byte) (int64, bool) {
	if string(b) == "-1" {
		return -1, true
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
