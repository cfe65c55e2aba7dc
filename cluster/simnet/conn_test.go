package simnet

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// isTimeout reports whether err is a deadline error as net/http expects it.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
}

func TestReadDeadline(t *testing.T) {
	tests := []struct {
		name string
		// block starts a Read, then act changes the deadline while it waits.
		act      func(c net.Conn)
		wantData bool // the Read gets the data sent after act instead of failing
	}{
		{
			name: "deadline in the past aborts a blocked read",
			act:  func(c net.Conn) { c.SetReadDeadline(time.Unix(1, 0)) },
		},
		{
			name: "deadline that passes aborts a blocked read",
			act:  func(c net.Conn) { c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)) },
		},
		{
			name: "SetDeadline applies to reads",
			act:  func(c net.Conn) { c.SetDeadline(time.Now().Add(-time.Second)) },
		},
		{
			name: "extended deadline keeps waiting",
			act: func(c net.Conn) {
				c.SetReadDeadline(time.Now().Add(time.Millisecond))
				c.SetReadDeadline(time.Now().Add(time.Hour))
			},
			wantData: true,
		},
		{
			name: "cleared deadline keeps waiting",
			act: func(c net.Conn) {
				c.SetReadDeadline(time.Now().Add(time.Millisecond))
				c.SetReadDeadline(time.Time{})
			},
			wantData: true,
		},
	}
	n := newNet(t, Options{})
	ln := listen(t, n, "server:80")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, server := connect(t, n, ln, "client")
			type result struct {
				n   int
				err error
			}
			done := make(chan result, 1)
			go func() {
				n, err := server.Read(make([]byte, 10))
				done <- result{n, err}
			}()
			time.Sleep(5 * time.Millisecond) // let the Read block
			tt.act(server)
			if tt.wantData {
				time.Sleep(30 * time.Millisecond)
				client.Write([]byte("hi"))
			}
			r := <-done
			if tt.wantData {
				if r.err != nil || r.n != 2 {
					t.Fatalf("Read = %d, %v; want 2, nil", r.n, r.err)
				}
				return
			}
			if !isTimeout(r.err) {
				t.Fatalf("Read = %v, want a timeout matching os.ErrDeadlineExceeded", r.err)
			}
			// Clearing the deadline makes the connection usable again, as
			// net/http relies on after aborting a background read.
			server.SetDeadline(time.Time{})
			roundTrip(t, client, server, "again")
		})
	}
}

func TestReadDeadlineBeatsData(t *testing.T) {
	n := newNet(t, Options{})
	ln := listen(t, n, "server:80")
	client, server := connect(t, n, ln, "client")
	client.Write([]byte("data"))
	server.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := server.Read(make([]byte, 4)); !isTimeout(err) {
		t.Fatalf("Read past its deadline = %v, want a timeout even with data buffered", err)
	}
}

func TestWriteBackPressure(t *testing.T) {
	const size = 64 << 10
	n := newNet(t, Options{BufferSize: size})
	ln := listen(t, n, "server:80")
	client, server := connect(t, n, ln, "client")

	// A write up to the buffer size needs no reader.
	if n, err := client.Write(make([]byte, size)); n != size || err != nil {
		t.Fatalf("Write(buffer size) = %d, %v; want %d, nil", n, err, size)
	}
	// A full buffer blocks until the write deadline.
	client.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	if n, err := client.Write([]byte("x")); n != 0 || !isTimeout(err) {
		t.Fatalf("Write on a full buffer = %d, %v; want 0 and a timeout", n, err)
	}
	client.SetWriteDeadline(time.Time{})

	// A blocked write resumes as the reader drains.
	done := make(chan error, 1)
	go func() {
		_, err := client.Write(make([]byte, 3*size))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Write of more than the free buffer returned %v before any read", err)
	default:
	}
	if _, err := io.ReadFull(server, make([]byte, 4*size)); err != nil {
		t.Fatalf("ReadFull: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func TestWriteDeadlineAbortsBlockedWrite(t *testing.T) {
	n := newNet(t, Options{BufferSize: 1024})
	ln := listen(t, n, "server:80")
	client, _ := connect(t, n, ln, "client")
	done := make(chan struct {
		n   int
		err error
	}, 1)
	go func() {
		n, err := client.Write(make([]byte, 3000))
		done <- struct {
			n   int
			err error
		}{n, err}
	}()
	time.Sleep(5 * time.Millisecond)
	client.SetWriteDeadline(time.Now())
	r := <-done
	if r.n != 1024 || !isTimeout(r.err) {
		t.Fatalf("Write = %d, %v; want 1024 and a timeout", r.n, r.err)
	}
}

func TestConnClose(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, client, server net.Conn)
	}{
		{
			name: "peer reads buffered data then EOF",
			run: func(t *testing.T, client, server net.Conn) {
				client.Write([]byte("last words"))
				client.Close()
				got, err := io.ReadAll(server)
				if err != nil || string(got) != "last words" {
					t.Fatalf("ReadAll = %q, %v; want the data and EOF", got, err)
				}
			},
		},
		{
			name: "local operations fail after Close",
			run: func(t *testing.T, client, server net.Conn) {
				client.Close()
				if _, err := client.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
					t.Errorf("Read = %v, want net.ErrClosed", err)
				}
				if _, err := client.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
					t.Errorf("Write = %v, want net.ErrClosed", err)
				}
				if err := client.Close(); !errors.Is(err, net.ErrClosed) {
					t.Errorf("second Close = %v, want net.ErrClosed", err)
				}
				if err := client.SetDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
					t.Errorf("SetDeadline = %v, want net.ErrClosed", err)
				}
			},
		},
		{
			name: "writes to a closed peer are reset",
			run: func(t *testing.T, client, server net.Conn) {
				server.Close()
				if _, err := client.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
					t.Errorf("Write = %v, want connection reset", err)
				}
			},
		},
		{
			name: "Close unblocks a local Read",
			run: func(t *testing.T, client, server net.Conn) {
				done := make(chan error, 1)
				go func() {
					_, err := client.Read(make([]byte, 1))
					done <- err
				}()
				time.Sleep(5 * time.Millisecond)
				client.Close()
				if err := <-done; !errors.Is(err, net.ErrClosed) {
					t.Errorf("Read = %v, want net.ErrClosed", err)
				}
			},
		},
		{
			name: "CloseWrite half-closes",
			run: func(t *testing.T, client, server net.Conn) {
				client.Write([]byte("req"))
				client.(*Conn).CloseWrite()
				got, err := io.ReadAll(server)
				if err != nil || string(got) != "req" {
					t.Fatalf("ReadAll = %q, %v; want the data and EOF", got, err)
				}
				if _, err := client.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
					t.Errorf("Write after CloseWrite = %v, want broken pipe", err)
				}
				server.Write([]byte("resp"))
				server.Close()
				got, err = io.ReadAll(client)
				if err != nil || string(got) != "resp" {
					t.Fatalf("ReadAll on the half-closed end = %q, %v; want the data and EOF", got, err)
				}
			},
		},
		{
			name: "zero-length operations",
			run: func(t *testing.T, client, server net.Conn) {
				if n, err := client.Write(nil); n != 0 || err != nil {
					t.Errorf("Write(nil) = %d, %v", n, err)
				}
				if n, err := server.Read(nil); n != 0 || err != nil {
					t.Errorf("Read(nil) = %d, %v", n, err)
				}
			},
		},
	}
	n := newNet(t, Options{})
	ln := listen(t, n, "server:80")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, server := connect(t, n, ln, "client")
			tt.run(t, client, server)
		})
	}
}
