// phases: franz-go in a scenario driven phase by phase from a test (the unclean election of
// tests/tests/kafka_unclean_election.rs), with what franz-go reports for every record:
//
//	franz-bench phases --bootstrap B --topic T --per-phase N [--on-data-loss yes|no]
//	    [--delivery-timeout-ms MS]
//
// It prints READY, then for each stdin line `PHASE k` sends records k*N .. (k+1)*N-1 to
// partition 0 (record i's value is "T/0/" and i in six digits, the test ledger's value), waits
// for every outcome, and prints one line per record in order, `R i OK offset` or
// `R i ERR text` (the error's words joined by '_'), then `DONE k`. With --on-data-loss yes a
// kgo.ProducerOnDataLossDetected hook prints `DATALOSS topic partition` when franz-go
// detects data loss. At the end of stdin it closes the client and exits 0.
//
// Settings: franz-go's idempotent defaults (acks all, idempotent writes), the manual
// partitioner, linger 0, and a record delivery timeout (60 s by default) so that no record
// waits for ever.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// out serializes stdout: the data-loss hook runs on its own goroutine.
var out sync.Mutex

func sayLocked(format string, args ...any) {
	out.Lock()
	defer out.Unlock()
	say(format, args...)
}

func phasesMain(args []string) int {
	fs := flag.NewFlagSet("phases", flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "", "bootstrap servers, comma-separated")
	topic := fs.String("topic", "", "the topic (partition 0 is written)")
	perPhase := fs.Int("per-phase", 100, "records per phase")
	onDataLoss := fs.String("on-data-loss", "yes", "yes: print DATALOSS lines from franz-go's data-loss hook")
	deliveryTimeout := fs.Int("delivery-timeout-ms", 60000, "kgo.RecordDeliveryTimeout")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *bootstrap == "" || *topic == "" || *perPhase < 1 || (*onDataLoss != "yes" && *onDataLoss != "no") {
		fmt.Fprintln(os.Stderr, "franz-bench phases: --bootstrap and --topic are required, --per-phase at least 1, --on-data-loss yes or no")
		return 2
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*bootstrap, ",")...),
		kgo.ClientID("phases-franz"),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(time.Duration(*deliveryTimeout) * time.Millisecond),
	}
	if *onDataLoss == "yes" {
		opts = append(opts, kgo.ProducerOnDataLossDetected(func(t string, p int32) {
			sayLocked("DATALOSS %s %d", t, p)
		}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz-bench phases: creating the client: %v\n", err)
		return 3
	}
	defer cl.Close()
	sayLocked("READY")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		w := strings.Fields(in.Text())
		if len(w) != 2 || w[0] != "PHASE" {
			fmt.Fprintf(os.Stderr, "franz-bench phases: expected 'PHASE k' on stdin, got %q\n", in.Text())
			return 2
		}
		k, err := strconv.Atoi(w[1])
		if err != nil || k < 0 {
			fmt.Fprintf(os.Stderr, "franz-bench phases: PHASE: %q is not a phase number\n", w[1])
			return 2
		}
		first := k * *perPhase
		lines := make([]string, *perPhase)
		var wg sync.WaitGroup
		wg.Add(*perPhase)
		for j := 0; j < *perPhase; j++ {
			i := first + j
			r := &kgo.Record{Topic: *topic, Partition: 0, Value: []byte(fmt.Sprintf("%s/0/%06d", *topic, i))}
			cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				if err != nil {
					lines[j] = fmt.Sprintf("R %d ERR %s", i, strings.Join(strings.Fields(err.Error()), "_"))
				} else {
					lines[j] = fmt.Sprintf("R %d OK %d", i, r.Offset)
				}
				wg.Done()
			})
		}
		wg.Wait()
		out.Lock()
		for _, l := range lines {
			say("%s", l)
		}
		say("DONE %d", k)
		out.Unlock()
	}
	return 0
}
