// Apache Kafka's own record-batch code (kafka-clients: MemoryRecordsBuilder to write,
// DefaultRecordBatch to validate and decompress, as the consumer and the broker do), driven
// from kprod's tests. Run as a single-file program against Kafka's libs:
//
//   java -cp "$KPROD_KAFKA/libs/*" tests/java-codec/KafkaCodec.java write
//       prints, per codec, "<codec> <hex of one batch>" (the golden vectors in
//       core/tests/golden_compression.rs come from this command)
//   java -cp "$KPROD_KAFKA/libs/*" tests/java-codec/KafkaCodec.java read < batches
//       reads lines of hex batches and prints every record: codec, producer id, epoch, base
//       sequence, offset delta, timestamp, key, value and headers (hex, "-" for null)
//   java -cp "$KPROD_KAFKA/libs/*" tests/java-codec/KafkaCodec.java consume BOOTSTRAP TOPIC PARTITIONS
//       Kafka's own KafkaConsumer reads every partition from the beginning to its end offset
//       and prints "partition offset timestamp key value headers..." per record (hex, "-" for
//       null), then "end <count>"
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.internal.CompressionType;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.MemoryRecordsBuilder;
import org.apache.kafka.common.record.internal.MutableRecordBatch;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.utils.internals.CloseableIterator;

public class KafkaCodec {
    static final HexFormat HEX = HexFormat.of();

    static String hex(ByteBuffer b) {
        if (b == null) return "-";
        byte[] a = new byte[b.remaining()];
        b.duplicate().get(a);
        return HEX.formatHex(a);
    }

    static Compression compression(String name) {
        switch (name) {
            case "gzip": return Compression.gzip().build();
            case "snappy": return Compression.snappy().build();
            case "lz4": return Compression.lz4().build();
            case "zstd": return Compression.zstd().build();
            default: return Compression.NONE;
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("write")) {
            for (String codec : new String[] {"none", "gzip", "snappy", "lz4", "zstd"}) {
                ByteBuffer buf = ByteBuffer.allocate(4096);
                MemoryRecordsBuilder b = MemoryRecords.builder(buf, RecordBatch.MAGIC_VALUE_V2,
                    compression(codec), TimestampType.CREATE_TIME, 0L, RecordBatch.NO_TIMESTAMP,
                    4242L, (short) 3, 17, false, RecordBatch.NO_PARTITION_LEADER_EPOCH);
                b.append(1700000000000L, "k1".getBytes(StandardCharsets.UTF_8),
                    "hello hello hello hello".getBytes(StandardCharsets.UTF_8),
                    new Header[] {new RecordHeader("h", "v".getBytes(StandardCharsets.UTF_8))});
                b.append(1700000000005L, null, "hello hello hello again".getBytes(StandardCharsets.UTF_8),
                    new Header[] {new RecordHeader("n", (byte[]) null)});
                b.append(1699999999999L, new byte[0], null, new Header[0]);
                System.out.println(codec + " " + hex(b.build().buffer()));
            }
            return;
        }
        if (args.length == 1 && args[0].equals("read")) {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                line = line.trim();
                if (line.isEmpty()) continue;
                MemoryRecords records = MemoryRecords.readableRecords(ByteBuffer.wrap(HEX.parseHex(line)));
                for (MutableRecordBatch batch : records.batches()) {
                    batch.ensureValid();
                    CompressionType c = batch.compressionType();
                    try (CloseableIterator<Record> it = batch.streamingIterator(
                            org.apache.kafka.common.utils.internals.BufferSupplier.NO_CACHING)) {
                        while (it.hasNext()) {
                            Record r = it.next();
                            r.ensureValid();
                            StringBuilder sb = new StringBuilder();
                            sb.append(c.name).append(' ').append(batch.producerId()).append(' ')
                              .append(batch.producerEpoch()).append(' ').append(batch.baseSequence())
                              .append(' ').append(r.offset()).append(' ').append(r.timestamp())
                              .append(' ').append(hex(r.key())).append(' ').append(hex(r.value()));
                            for (Header h : r.headers()) {
                                sb.append(' ').append(h.key()).append('=')
                                  .append(h.value() == null ? "-" : HEX.formatHex(h.value()));
                            }
                            System.out.println(sb);
                        }
                    }
                }
            }
            return;
        }
        if (args.length == 4 && args[0].equals("consume")) {
            consume(args[1], args[2], Integer.parseInt(args[3]));
            return;
        }
        System.err.println("usage: KafkaCodec write | read | consume BOOTSTRAP TOPIC PARTITIONS");
        System.exit(2);
    }

    static String hexBytes(byte[] b) {
        return b == null ? "-" : HEX.formatHex(b);
    }

    static void consume(String bootstrap, String topic, int partitions) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("enable.auto.commit", "false");
        p.put("check.crcs", "true");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long count = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(30));
            long deadline = System.currentTimeMillis() + 120_000;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp, Duration.ofSeconds(30)) < end.get(tp)) done = false;
                }
                if (done) break;
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("timed out before the end offsets " + end);
                    System.exit(1);
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    StringBuilder sb = new StringBuilder();
                    sb.append(r.partition()).append(' ').append(r.offset()).append(' ')
                      .append(r.timestamp()).append(' ').append(hexBytes(r.key())).append(' ')
                      .append(hexBytes(r.value()));
                    for (Header h : r.headers()) {
                        sb.append(' ').append(h.key()).append('=').append(hexBytes(h.value()));
                    }
                    System.out.println(sb);
                    count++;
                }
            }
        }
        System.out.println("end " + count);
    }
}
