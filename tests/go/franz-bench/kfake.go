package main

// `franz-bench kfake`: franz-go's fake cluster (github.com/twmb/franz-go/pkg/kfake) as a test
// broker for kprod. kfake validates idempotent sequences per producer id and partition as
// Kafka does (the last five batches kept; a duplicate of one answered success at its offset;
// any other first sequence but the next refused OUT_OF_ORDER_SEQUENCE_NUMBER), with several
// brokers, and leader moves cheap enough to make hundreds a second.
//
// Usage: franz-bench kfake --brokers N --topics NAME:PARTITIONS[,NAME:PARTITIONS...]
//
// It prints "READY addr,addr,..." (the brokers, node 0 first), then takes one command a line
// on stdin and answers each with one line, "OK ..." or "ERR ...":
//
//	SHUFFLE               every partition gets a random leader, its leader epoch bumped
//	MOVE TOPIC P NODE     partition P of TOPIC moves to NODE, its leader epoch bumped
//	LEADER TOPIC P        OK NODE
//	FAIL CODE COUNT [TOPIC PARTITION]
//	                      the next COUNT Produce requests (with TOPIC PARTITION: the next
//	                      COUNT carrying it) are answered CODE for every partition (only for
//	                      that one), unprocessed (nothing written; the other partitions of the
//	                      request are processed as usual)
//	                      (FAIL and AFTER add to those still waiting for requests; DROP,
//	                      LOSE and HOLD set their own count)
//	CLEAR                 every fault still waiting for requests is withdrawn
//	DROP COUNT            the next COUNT Produce requests close their connection unprocessed
//	AFTER CODE COUNT [TOPIC PARTITION]
//	                      as FAIL, but the partitions are processed (written, when the
//	                      broker takes them) and then answered CODE: 7
//	                      (REQUEST_TIMED_OUT) or 20 (NOT_ENOUGH_REPLICAS_AFTER_APPEND), as
//	                      Kafka answers when replication did not finish in time (kfake's
//	                      Fault API)
//	LOSE COUNT            the next COUNT Produce requests are processed (written, when the
//	                      broker takes them) and then their connection is closed without the
//	                      answer: the fault an idempotent producer exists for
//	HOLD MS COUNT         the next COUNT Produce requests are held MS milliseconds, then
//	                      processed and answered (a producer that gave up on the request
//	                      meanwhile, its request timeout, meets it late: a zombie, taken by
//	                      the broker if it comes before the retry, else a duplicate or refused)
//	STATS                 OK produce=N failed=N dropped=N lost=N lost_written=N after=N held=N held_taken=N (Produce
//	                      requests seen; faults applied; lost answers whose batches were all
//	                      answered success or duplicate, i.e. written; held requests whose
//	                      batches were all answered success or duplicate)
//
// End of input closes the cluster and exits 0.

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// forwardTimeout marks a Produce request that this program forwards to the cluster itself
// (for LOSE and HOLD): kfake ignores the timeout, and the control function lets it through.
const forwardTimeout = 987_654

type faults struct {
	mu                                  sync.Mutex
	drop, lose, hold                    int
	holdFor                             time.Duration
	produce, dropped, lost, lostWritten int
	held, heldTaken                     int
	fail, after                         []*kfake.FaultHandle
}

func kfakeMain(args []string) int {
	fs := flag.NewFlagSet("kfake", flag.ExitOnError)
	brokers := fs.Int("brokers", 3, "number of brokers")
	topics := fs.String("topics", "", "NAME:PARTITIONS, comma-separated")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opts := []kfake.Opt{kfake.NumBrokers(*brokers)}
	for _, t := range strings.Split(*topics, ",") {
		name, p, ok := strings.Cut(t, ":")
		n, err := strconv.Atoi(p)
		if !ok || err != nil || n < 1 || name == "" {
			fmt.Fprintf(os.Stderr, "franz-bench kfake: --topics: %q is not NAME:PARTITIONS\n", t)
			return 2
		}
		opts = append(opts, kfake.SeedTopics(int32(n), name))
	}
	if *brokers < 1 {
		fmt.Fprintln(os.Stderr, "franz-bench kfake: --brokers must be at least 1")
		return 2
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz-bench kfake: %v\n", err)
		return 1
	}
	defer c.Close()
	addrs := c.ListenAddrs()

	// One raw client per broker, for the forwarded requests: at most Produce v12, which
	// names topics (v13 names them by id, which a copy of a v12 request does not carry).
	forwarders := make([]*kgo.Client, len(addrs))
	for i, a := range addrs {
		if forwarders[i], err = kgo.NewClient(kgo.SeedBrokers(a), kgo.MaxVersions(kversion.V4_0_0())); err != nil {
			fmt.Fprintf(os.Stderr, "franz-bench kfake: %v\n", err)
			return 1
		}
		defer forwarders[i].Close()
	}

	f := &faults{}
	// The request the control function is running for, sent after `d` to the broker that
	// read it, on a connection of our own (so that its answer can be seen); nil if that
	// failed. While it sleeps, the cluster serves other connections.
	forwardAfter := func(req *kmsg.ProduceRequest, d time.Duration) *kmsg.ProduceResponse {
		node := c.CurrentNode()
		var resp *kmsg.ProduceResponse
		c.SleepControl(func() {
			time.Sleep(d)
			resp = forward(forwarders, node, req)
		})
		return resp
	}
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.ProduceRequest)
		if req.TimeoutMillis == forwardTimeout {
			return nil, nil, false
		}
		f.mu.Lock()
		f.produce++
		switch {
		case f.drop > 0:
			f.drop--
			f.dropped++
			f.mu.Unlock()
			return nil, errors.New("injected: connection dropped"), true
		case f.hold > 0:
			f.hold--
			f.held++
			d := f.holdFor
			f.mu.Unlock()
			// Held, then processed, and the answer given to the producer's connection if
			// it is still open.
			resp := forwardAfter(req, d)
			if resp == nil {
				return nil, errors.New("held: the forwarded request failed"), true
			}
			if allWritten(resp) {
				f.mu.Lock()
				f.heldTaken++
				f.mu.Unlock()
			}
			resp.Version = req.Version
			return resp, nil, true
		case f.lose > 0 && req.Acks != 0:
			f.lose--
			f.lost++
			f.mu.Unlock()
		default:
			f.mu.Unlock()
			return nil, nil, false
		}
		// LOSE: the request is processed, and the client's connection is then closed without
		// an answer.
		if resp := forwardAfter(req, 0); resp != nil && allWritten(resp) {
			f.mu.Lock()
			f.lostWritten++
			f.mu.Unlock()
		}
		return nil, errors.New("injected: answer lost"), true
	})

	say("READY %s", strings.Join(addrs, ","))
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		say("%s", command(c, f, strings.Fields(in.Text())))
	}
	return 0
}

func command(c *kfake.Cluster, f *faults, w []string) string {
	num := func(i int) (int, bool) {
		if i >= len(w) {
			return 0, false
		}
		n, err := strconv.Atoi(w[i])
		return n, err == nil && n >= 0
	}
	if len(w) == 0 {
		return "ERR empty command"
	}
	switch w[0] {
	case "SHUFFLE":
		c.ShufflePartitionLeaders()
		return "OK"
	case "MOVE":
		p, ok1 := num(2)
		n, ok2 := num(3)
		if len(w) != 4 || !ok1 || !ok2 {
			return "ERR usage: MOVE TOPIC PARTITION NODE"
		}
		if err := c.MoveTopicPartition(w[1], int32(p), int32(n)); err != nil {
			return "ERR " + err.Error()
		}
		return "OK"
	case "LEADER":
		p, ok := num(2)
		if len(w) != 3 || !ok {
			return "ERR usage: LEADER TOPIC PARTITION"
		}
		return fmt.Sprintf("OK %d", c.LeaderFor(w[1], int32(p)))
	case "FAIL", "AFTER":
		code, ok1 := num(1)
		n, ok2 := num(2)
		fault := kfake.Fault{
			Keys:  []kmsg.Key{kmsg.Produce},
			Count: n,
			// Not the requests this program forwards itself (LOSE, HOLD): the producer
			// would never meet the fault.
			When: func(r kmsg.Request) bool {
				p, ok := r.(*kmsg.ProduceRequest)
				return !ok || p.TimeoutMillis != forwardTimeout
			},
		}
		if len(w) == 5 {
			p, ok := num(4)
			if !ok {
				return "ERR " + w[0] + ": " + w[4] + " is not a partition"
			}
			fault.Topic, fault.Partitions = w[3], []int32{int32(p)}
		}
		after := w[0] == "AFTER"
		if len(w) != 3 && len(w) != 5 || !ok1 || !ok2 || n < 1 || code < 1 || code > 32767 ||
			after && code != 7 && code != 20 {
			return "ERR usage: FAIL CODE COUNT [TOPIC PARTITION] or AFTER 7|20 COUNT [TOPIC PARTITION]"
		}
		e, ok := kerr.ErrorForCode(int16(code)).(*kerr.Error)
		if !ok {
			return fmt.Sprintf("ERR %d is not an error code franz-go knows", code)
		}
		if !after && (code == 7 || code == 20) {
			// kfake writes before answering these two; FAIL promises nothing written.
			return "ERR FAIL writes nothing: use AFTER for 7 and 20, or another code"
		}
		fault.Err = e
		f.mu.Lock()
		h := c.Fault(fault)
		if after {
			f.after = append(f.after, h)
		} else {
			f.fail = append(f.fail, h)
		}
		f.mu.Unlock()
		return "OK"
	case "DROP", "LOSE":
		n, ok := num(1)
		if len(w) != 2 || !ok {
			return "ERR usage: " + w[0] + " COUNT"
		}
		f.mu.Lock()
		if w[0] == "DROP" {
			f.drop = n
		} else {
			f.lose = n
		}
		f.mu.Unlock()
		return "OK"
	case "CLEAR":
		f.mu.Lock()
		defer f.mu.Unlock()
		// Removing a fault that answered all its requests already does nothing.
		for _, hs := range [][]*kfake.FaultHandle{f.fail, f.after} {
			for _, h := range hs {
				h.Remove()
			}
		}
		f.drop, f.lose, f.hold = 0, 0, 0
		return "OK"
	case "HOLD":
		ms, ok1 := num(1)
		n, ok2 := num(2)
		if len(w) != 3 || !ok1 || !ok2 {
			return "ERR usage: HOLD MS COUNT"
		}
		f.mu.Lock()
		f.hold, f.holdFor = n, time.Duration(ms)*time.Millisecond
		f.mu.Unlock()
		return "OK"
	case "STATS":
		f.mu.Lock()
		defer f.mu.Unlock()
		hits := func(hs []*kfake.FaultHandle) (n int) {
			for _, h := range hs {
				n += h.Hits()
			}
			return n
		}
		return fmt.Sprintf("OK produce=%d failed=%d dropped=%d lost=%d lost_written=%d after=%d held=%d held_taken=%d",
			f.produce, hits(f.fail), f.dropped, f.lost, f.lostWritten, hits(f.after), f.held, f.heldTaken)
	}
	return fmt.Sprintf("ERR unknown command %q", w[0])
}

// forward sends a copy of req to node on a connection of our own, marked so that the control
// function lets it through, and returns the answer (nil if it failed).
func forward(forwarders []*kgo.Client, node int32, req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	if node < 0 || int(node) >= len(forwarders) {
		return nil
	}
	fwd := *req
	fwd.TimeoutMillis = forwardTimeout
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := forwarders[node].SeedBrokers()[0].Request(ctx, &fwd)
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz-bench kfake: forwarding to node %d: %v\n", node, err)
		return nil
	}
	return resp.(*kmsg.ProduceResponse)
}

// allWritten: every partition answered success or DUPLICATE_SEQUENCE_NUMBER.
func allWritten(resp *kmsg.ProduceResponse) bool {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 && p.ErrorCode != 46 {
				return false
			}
		}
	}
	return true
}
