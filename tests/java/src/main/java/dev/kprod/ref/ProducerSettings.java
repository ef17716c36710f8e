package dev.kprod.ref;

import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The producer configuration every command shares: idempotent, acks=all, no compression, and
 * the flags below. {@code --set key=value} (repeatable) adds or overrides any property.
 */
final class ProducerSettings {
    static final String FLAGS = ""
            + "  --bootstrap HOST:PORT[,...]   brokers (required)\n"
            + "  --client-id ID                client.id (default kprod-java-ref)\n"
            + "  --max-in-flight N             max.in.flight.requests.per.connection (default 5)\n"
            + "  --linger-ms MS                linger.ms (default 5)\n"
            + "  --batch-size BYTES            batch.size (default 16384)\n"
            + "  --request-timeout-ms MS       request.timeout.ms (default 30000)\n"
            + "  --delivery-timeout-ms MS      delivery.timeout.ms (default 120000)\n"
            + "  --retry-backoff-ms MS         retry.backoff.ms (default 100)\n"
            + "  --set KEY=VALUE               any other producer property (repeatable)\n";

    final String bootstrap;
    private final Properties props = new Properties();

    ProducerSettings(Args a, String defaultClientId) {
        bootstrap = a.str("bootstrap");
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG,
                a.optStr("client-id") == null ? defaultClientId : a.optStr("client-id"));
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
        props.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
                Long.toString(a.integer("max-in-flight", 5, 1)));
        props.put(ProducerConfig.LINGER_MS_CONFIG, Long.toString(a.integer("linger-ms", 5, 0)));
        props.put(ProducerConfig.BATCH_SIZE_CONFIG,
                Long.toString(a.integer("batch-size", 16_384, 0)));
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG,
                Long.toString(a.integer("request-timeout-ms", 30_000, 1)));
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG,
                Long.toString(a.integer("delivery-timeout-ms", 120_000, 1)));
        props.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG,
                Long.toString(a.integer("retry-backoff-ms", 100, 0)));
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG,
                ByteArraySerializer.class.getName());
        for (Map.Entry<String, String> e : a.sets().entrySet()) {
            props.put(e.getKey(), e.getValue());
        }
    }

    /** The producer's effective delivery timeout (a {@code --set} may override the flag). */
    long deliveryTimeoutMs() {
        return Long.parseLong(props.getProperty(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG));
    }

    /**
     * A new producer. A configuration Kafka refuses (e.g. delivery.timeout.ms below
     * linger.ms + request.timeout.ms) is a usage error.
     */
    KafkaProducer<byte[], byte[]> create() {
        try {
            return new KafkaProducer<>(props);
        } catch (org.apache.kafka.common.config.ConfigException e) {
            throw new Args.UsageException("producer configuration refused: " + e.getMessage());
        }
    }
}
