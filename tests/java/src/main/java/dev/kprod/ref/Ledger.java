package dev.kprod.ref;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;

/**
 * {@code ledger}: the fault-scenario ledger of tests/src/ledger.rs with the Java producer.
 * Record i goes to the partitions in turn, key {@code k<i>}, value
 * {@code TOPIC/PARTITION/<i, 6 digits>}; one outcome line per record.
 */
final class Ledger {
    static final String USAGE = ""
            + "ledger --bootstrap B --topic T --out FILE [--records N] [--partitions P | --partition-list L]\n"
            + "       [--rate R] [--mark-every K] [--pause-at K1,K2,...] [--flush-before-pause 1]\n"
            + "       [--resolve-timeout-ms MS] [producer flags]\n"
            + "  --records N             records to send (default 1000)\n"
            + "  --partitions P          round robin over partitions 0..P-1 (default 1)\n"
            + "  --partition-list L      round robin over these partitions instead, e.g. 0,2\n"
            + "  --rate R                at most R sends per second (default 0: unpaced)\n"
            + "  --mark-every K          print 'SENT <k>' on stdout after every K sends\n"
            + "  --pause-at K1,...       after K sends print 'PAUSED <k>' and wait for a line on stdin\n"
            + "  --flush-before-pause 1  flush() before each pause: every record sent so far has\n"
            + "                          its outcome when 'PAUSED <k>' is printed (default 0)\n"
            + "  --resolve-timeout-ms MS how long to wait for the callbacks after the last send\n"
            + "                          (default delivery.timeout.ms + 30000)\n"
            + "  --out FILE              the outcome file\n";

    private Ledger() {}

    static int run(Args a) throws Exception {
        ProducerSettings settings = new ProducerSettings(a, "kprod-java-ref-ledger");
        String topic = a.str("topic");
        int records = a.int32("records", 1000, 1);
        List<Long> list = a.integers("partition-list", 0);
        String partitionsFlag = a.optStr("partitions");
        if (list != null && partitionsFlag != null) {
            throw new Args.UsageException("give --partitions or --partition-list, not both");
        }
        int[] targets;
        if (list != null) {
            targets = list.stream().mapToInt(Long::intValue).toArray();
        } else {
            int partitions = a.int32("partitions", 1, 1);
            targets = new int[partitions];
            for (int p = 0; p < partitions; p++) {
                targets[p] = p;
            }
        }
        long rate = a.integer("rate", 0, 0);
        long markEvery = a.integer("mark-every", 0, 0);
        List<Long> pauseList = a.integers("pause-at", 1);
        Set<Long> pauseAt = pauseList == null ? Set.of() : new HashSet<>(pauseList);
        boolean flushBeforePause = a.integer("flush-before-pause", 0, 0) != 0;
        Path out = Path.of(a.str("out"));
        long resolveTimeout =
                a.integer("resolve-timeout-ms", settings.deliveryTimeoutMs() + 30_000, 1);
        a.finish();

        Outcomes outcomes = new Outcomes(records, "");
        BufferedReader stdin =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        boolean allResolved;
        try (KafkaProducer<byte[], byte[]> producer = settings.create()) {
            long start = System.nanoTime();
            for (int i = 0; i < records; i++) {
                if (rate > 0) {
                    long due = start + (long) (i * (1e9 / rate));
                    for (long wait = due - System.nanoTime(); wait > 0;
                            wait = due - System.nanoTime()) {
                        LockSupport.parkNanos(wait);
                    }
                }
                int partition = targets[i % targets.length];
                byte[] key = ("k" + i).getBytes(StandardCharsets.UTF_8);
                byte[] value = String.format("%s/%d/%06d", topic, partition, i)
                        .getBytes(StandardCharsets.UTF_8);
                ProducerRecord<byte[], byte[]> record =
                        new ProducerRecord<>(topic, partition, key, value);
                try {
                    producer.send(record, outcomes.track(i, partition));
                } catch (KafkaException e) {
                    outcomes.refused(i, e);
                }
                long sent = i + 1L;
                if (markEvery > 0 && sent % markEvery == 0) {
                    Main.say("SENT " + sent);
                }
                if (pauseAt.contains(sent)) {
                    if (flushBeforePause) {
                        producer.flush();
                    }
                    Main.say("PAUSED " + sent);
                    // End of input also resumes: the controlling process is gone.
                    stdin.readLine();
                }
            }
            allResolved = outcomes.await(resolveTimeout);
            // The file first: closing fails the records still outstanding, which had no
            // outcome within the bound.
            Outcomes.writeFile(out, List.of(outcomes));
            producer.close(allResolved ? Duration.ofSeconds(30) : Duration.ZERO);
        }
        Main.say("DONE records=" + records + " delivered=" + outcomes.count(Outcomes.DELIVERED)
                + " failed=" + outcomes.count(Outcomes.FAILED)
                + " unresolved=" + outcomes.count(Outcomes.UNRESOLVED));
        return allResolved ? 0 : 1;
    }
}
