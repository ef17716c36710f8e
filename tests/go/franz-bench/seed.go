package main

// The seed scenario of tests/src/seed.rs with franz-go, as the Java reference producer's
// `seed` command (tests/java, Seed.java) runs it, with the same arguments, outcome file and
// stdout lines, so that tests/src/javaref.rs reads both alike:
//
//	franz-bench seed --bootstrap B --topic T --run HEX --out FILE [--partitions P]
//	    [--ticks N] [--period-us US] [--bursts N] [--burst-size N] [--record-size BYTES]
//	    [--resolve-timeout-ms MS] [--linger-ms MS] [--batch-size BYTES]
//	    [--max-kafka-version V]
//
// A ticker (stream 0) sends one record per period to partitions 0, 1, 2, ... in turn; burst b
// (stream 1 + b, a goroutine of its own) starts once the ticker has sent
// (b + 1) * ticks / (bursts + 1) records and sends burst-size records round robin over the
// partitions, all outstanding before it waits for them. Values are `kprod-seed RUN STREAM SEQ `
// padded with dots to record-size bytes, no key. The outcome file has one line per record,
// `STREAM:SEQ<TAB>PARTITION<TAB>STATUS<TAB>OFFSET<TAB>ERROR`; stdout has `TICKER ...`, one
// `BURST ...` line per burst, `LATENCY ...` for the ticker and for the bursts (send call to
// promise, nearest-rank percentiles and the mean, microseconds), then `DONE ...`.

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	delivered  = 1
	failed     = 2
	unresolved = 0
)

// outcomes is what became of each record of one stream.
type outcomes struct {
	prefix     string
	partitions []int32
	status     []atomic.Int32
	offsets    []int64
	errs       []string
	latency    []int64 // ns from the send call to the promise; -1 unless delivered
	pending    sync.WaitGroup
}

func newOutcomes(n int, prefix string) *outcomes {
	o := &outcomes{
		prefix:     prefix,
		partitions: make([]int32, n),
		status:     make([]atomic.Int32, n),
		offsets:    make([]int64, n),
		errs:       make([]string, n),
		latency:    make([]int64, n),
	}
	for i := range o.latency {
		o.latency[i] = -1
		o.offsets[i] = -1
	}
	o.pending.Add(n)
	return o
}

// send produces record i of the stream and resolves it in the promise.
func (o *outcomes) send(cl *kgo.Client, topic string, i int, partition int32, value []byte) {
	o.partitions[i] = partition
	start := time.Now()
	cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: partition, Value: value},
		func(r *kgo.Record, err error) {
			if err != nil {
				o.errs[i] = strings.Join(strings.Fields(err.Error()), " ")
				if o.errs[i] == "" {
					o.errs[i] = "error"
				}
				o.status[i].Store(failed)
			} else {
				o.latency[i] = int64(time.Since(start))
				o.offsets[i] = r.Offset
				o.status[i].Store(delivered)
			}
			o.pending.Done()
		})
}

// await waits until every record resolved, or timeout; true if all did.
func (o *outcomes) await(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { o.pending.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

func (o *outcomes) count(status int32) int {
	n := 0
	for i := range o.status {
		if o.status[i].Load() == status {
			n++
		}
	}
	return n
}

func (o *outcomes) write(w *bufio.Writer) {
	for i := range o.status {
		st := o.status[i].Load()
		name, off, e := "unresolved", int64(-1), ""
		switch st {
		case delivered:
			name, off = "delivered", o.offsets[i]
		case failed:
			name, e = "failed", o.errs[i]
		}
		fmt.Fprintf(w, "%s%d\t%d\t%s\t%d\t%s\n", o.prefix, i, o.partitions[i], name, off, e)
	}
}

// latencyLine is `LATENCY stream=NAME count=N p50_us= p99_us= p999_us= max_us= mean_us=`.
func latencyLine(name string, streams []*outcomes) string {
	var all []int64
	for _, o := range streams {
		for i, l := range o.latency {
			if l >= 0 && o.status[i].Load() == delivered {
				all = append(all, l)
			}
		}
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	s := fmt.Sprintf("LATENCY stream=%s count=%d", name, len(all))
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}, {"p999", 0.999}, {"max", 1.0}} {
		v := int64(0)
		if len(all) > 0 {
			i := int(math.Ceil(float64(len(all)) * q.q))
			i = min(max(i, 1), len(all)) - 1
			v = all[i]
		}
		s += fmt.Sprintf(" %s_us=%d", q.name, v/1000)
	}
	var sum int64
	for _, v := range all {
		sum += v
	}
	mean := int64(0)
	if len(all) > 0 {
		mean = sum / int64(len(all))
	}
	return s + fmt.Sprintf(" mean_us=%d", mean/1000)
}

func seedValue(run string, stream, seq, size int) []byte {
	head := []byte(fmt.Sprintf("kprod-seed %s %d %d ", run, stream, seq))
	if len(head) >= size {
		return head
	}
	v := make([]byte, size)
	copy(v, head)
	for j := len(head); j < size; j++ {
		v[j] = '.'
	}
	return v
}

func seed(args []string) int {
	fs := flag.NewFlagSet("seed", flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "", "bootstrap servers, comma-separated")
	topic := fs.String("topic", "", "the topic")
	runHex := fs.String("run", "", "run id (16 hex digits)")
	out := fs.String("out", "", "the outcome file")
	partitions := fs.Int("partitions", 3, "the topic's partitions")
	ticks := fs.Int("ticks", 2000, "records the ticker sends")
	periodUs := fs.Int("period-us", 1000, "the ticker's period")
	bursts := fs.Int("bursts", 3, "bursts")
	burstSize := fs.Int("burst-size", 10000, "records per burst")
	recordSize := fs.Int("record-size", 100, "value size")
	resolveMs := fs.Int("resolve-timeout-ms", 120000, "how long a stream's records may take to resolve once it sent its last one")
	linger := fs.Int("linger-ms", 5, "linger.ms")
	batch := fs.Int("batch-size", 16384, "batch.size (ProducerBatchMaxBytes)")
	maxVersion := fs.String("max-kafka-version", "", "cap request versions at this Kafka release's")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	runID, err := strconv.ParseUint(*runHex, 16, 64)
	if *bootstrap == "" || *topic == "" || *out == "" || err != nil || *partitions < 1 || *periodUs < 1 {
		fmt.Fprintln(os.Stderr, "franz-bench seed: --bootstrap, --topic, --out and a hexadecimal --run are required; --partitions and --period-us at least 1")
		return 2
	}
	run := fmt.Sprintf("%016x", runID)
	s := &settings{
		bootstrap:  strings.Split(*bootstrap, ","),
		partitions: *partitions,
		linger:     time.Duration(*linger) * time.Millisecond,
		batchSize:  *batch,
	}
	if *maxVersion != "" {
		if s.maxVersion = parseVersion(*maxVersion); s.maxVersion == nil {
			fmt.Fprintf(os.Stderr, "franz-bench: --max-kafka-version: %q is not a Kafka version\n", *maxVersion)
			return 2
		}
	}
	cl, err := s.client()
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz-bench seed: creating the client: %v\n", err)
		return 3
	}
	resolve := time.Duration(*resolveMs) * time.Millisecond
	ticker := newOutcomes(*ticks, "0:")
	streams := []*outcomes{ticker}
	goCh := make([]chan struct{}, *bursts)
	triggers := make([]int64, *bursts)
	for b := 0; b < *bursts; b++ {
		goCh[b] = make(chan struct{})
		triggers[b] = int64(b+1) * int64(*ticks) / int64(*bursts+1)
		streams = append(streams, newOutcomes(*burstSize, fmt.Sprintf("%d:", 1+b)))
	}
	var ticked atomic.Int64
	burstLines := make([]string, *bursts)
	resolved := make([]bool, 1+*bursts)
	started := time.Now()
	var wg sync.WaitGroup
	for b := 0; b < *bursts; b++ {
		wg.Add(1)
		go func(b int) {
			defer wg.Done()
			<-goCh[b]
			o := streams[1+b]
			atStart := ticked.Load()
			t0 := time.Now()
			bytes := 0
			for seq := 0; seq < *burstSize; seq++ {
				v := seedValue(run, 1+b, seq, *recordSize)
				bytes += len(v)
				o.send(cl, *topic, seq, int32(seq%*partitions), v)
			}
			enqueue := time.Since(t0)
			resolved[1+b] = o.await(resolve)
			duration := time.Since(t0)
			burstLines[b] = fmt.Sprintf("BURST b=%d records=%d bytes=%d start_us=%d enqueue_us=%d duration_us=%d ticks_at_start=%d ticks_during=%d",
				b, *burstSize, bytes, t0.Sub(started).Microseconds(), enqueue.Microseconds(),
				duration.Microseconds(), atStart, ticked.Load()-atStart)
		}(b)
	}
	var tickerTime time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		period := time.Duration(*periodUs) * time.Microsecond
		fired := make([]bool, *bursts)
		first := time.Now()
		for seq := 0; seq < *ticks; seq++ {
			if wait := time.Until(first.Add(time.Duration(seq) * period)); wait > 0 {
				time.Sleep(wait)
			}
			ticker.send(cl, *topic, seq, int32(seq%*partitions), seedValue(run, 0, seq, *recordSize))
			n := ticked.Add(1)
			for b := range goCh {
				if !fired[b] && n >= triggers[b] {
					fired[b] = true
					close(goCh[b])
				}
			}
		}
		tickerTime = time.Since(first)
		for b := range goCh {
			if !fired[b] {
				close(goCh[b])
			}
		}
		resolved[0] = ticker.await(resolve)
	}()
	wg.Wait()
	elapsed := time.Since(started)
	// The file first: closing abandons what is still outstanding.
	tmp := *out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz-bench seed: %v\n", err)
		return 3
	}
	w := bufio.NewWriter(f)
	for _, o := range streams {
		o.write(w)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(os.Stderr, "franz-bench seed: %v\n", err)
		return 3
	}
	f.Close()
	if err := os.Rename(tmp, *out); err != nil {
		fmt.Fprintf(os.Stderr, "franz-bench seed: %v\n", err)
		return 3
	}
	all := true
	for _, r := range resolved {
		all = all && r
	}
	cl.Close()
	say("TICKER records=%d seconds=%f", *ticks, tickerTime.Seconds())
	for _, l := range burstLines {
		say("%s", l)
	}
	var d, fl, u int
	for _, o := range streams {
		d += o.count(delivered)
		fl += o.count(failed)
		u += o.count(unresolved)
	}
	say("%s", latencyLine("ticker", streams[:1]))
	say("%s", latencyLine("burst", streams[1:]))
	say("DONE records=%d delivered=%d failed=%d unresolved=%d elapsed_us=%d",
		*ticks+*bursts**burstSize, d, fl, u, elapsed.Microseconds())
	if !all {
		return 1
	}
	return 0
}
