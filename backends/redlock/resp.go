package redlock

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The RESP2 subset Redlock speaks on its own connections: commands are
// arrays of bulk strings; replies are read in full, arrays discarded.

func appendArray(b []byte, n int) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

func appendBulk(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// appendBulkConcat appends s+t as one bulk string, without building it.
func appendBulkConcat(b []byte, s, t string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)+len(t)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	b = append(b, t...)
	return append(b, '\r', '\n')
}

func appendBulkInt(b []byte, i int64) []byte {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], i, 10)
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(d)), 10)
	b = append(b, '\r', '\n')
	b = append(b, d...)
	return append(b, '\r', '\n')
}

// appendCommand appends one command made of string arguments.
func appendCommand(b []byte, args ...string) []byte {
	b = appendArray(b, len(args))
	for _, a := range args {
		b = appendBulk(b, a)
	}
	return b
}

// reply is one RESP reply. Of an array (BLPOP's, EXEC's) it keeps the
// kind and text of each element (an integer's in decimal), not nested
// arrays.
type reply struct {
	kind  byte     // '+' status, '-' error, ':' integer, '$' bulk, '*' array, 0 nil
	n     int64    // the integer, or the array length
	s     string   // the status, error or bulk text
	elems []string // an array's elements' texts
	kinds []byte   // an array's elements' kinds
}

// err returns the reply as a Go error when it is a Redis error reply.
func (r reply) err() error {
	if r.kind == '-' {
		return redisError(r.s)
	}
	return nil
}

// redisError is an error reply from the server, such as NOSCRIPT or
// READONLY.
type redisError string

func (e redisError) Error() string { return string(e) }

var errProtocol = errors.New("redis protocol error")

func readReply(r *bufio.Reader) (reply, error) {
	line, err := readLine(r)
	if err != nil {
		return reply{}, err
	}
	if len(line) == 0 {
		return reply{}, fmt.Errorf("%w: empty line", errProtocol)
	}
	switch kind, body := line[0], line[1:]; kind {
	case '+', '-':
		return reply{kind: kind, s: string(body)}, nil
	case ':':
		n, err := parseInt(body)
		return reply{kind: ':', n: n}, err
	case '$':
		n, err := parseInt(body)
		if err != nil {
			return reply{}, err
		}
		if n < 0 {
			return reply{}, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return reply{}, err
		}
		return reply{kind: '$', s: string(buf[:n])}, nil
	case '*':
		n, err := parseInt(body)
		if err != nil {
			return reply{}, err
		}
		if n < 0 {
			return reply{}, nil
		}
		elems := make([]string, 0, min(n, 16))
		kinds := make([]byte, 0, min(n, 16))
		for range n {
			e, err := readReply(r)
			if err != nil {
				return reply{}, err
			}
			if e.kind == ':' {
				e.s = strconv.FormatInt(e.n, 10)
			}
			elems, kinds = append(elems, e.s), append(kinds, e.kind)
		}
		return reply{kind: '*', n: n, elems: elems, kinds: kinds}, nil
	default:
		return reply{}, fmt.Errorf("%w: unexpected reply type %q", errProtocol, kind)
	}
}

// readLine returns the next line without its CRLF. The slice is valid
// until the next read.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: line %q not ended by CRLF", errProtocol, line)
	}
	return line[:len(line)-2], nil
}

func parseInt(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("%w: empty integer", errProtocol)
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: bad integer %q", errProtocol, b)
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}

func errProtocolf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errProtocol, fmt.Sprintf(format, args...))
}
