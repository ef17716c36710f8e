//! kprod (through kprod-tokio) against a real Tansu broker, through the fault proxy
//! (`kprod_tests::proxy`): lost responses of processed requests, delays, blackholes,
//! truncated and corrupted responses, refused connections, faults during the handshake,
//! delivery timeouts and `close()` during faults.
//!
//! The scenarios live in `kprod_tests::faults`, shared with `kafka_faults_proxy.rs`. Each
//! test here starts its own Tansu broker, which advertises the proxy's address in Metadata,
//! so every connection kprod opens goes through the proxy. After each scenario the proxy is
//! healed and the independent reader (librdkafka's consumer) reads every partition;
//! `Ledger::check` then asserts per partition: no record duplicated, send order kept, every
//! acknowledged record at its reported offset (present at all when the offset is `None`,
//! Tansu's DUPLICATE_SEQUENCE_NUMBER answer to a retry of a written batch), every
//! `NotPersisted` failure absent; and every future resolved within a bound.
//!
//! Needs the Tansu binary (`scripts/install-tansu.sh`, or `KPROD_TANSU=/path/to/tansu`).

use kprod_tests::faults;

macro_rules! tansu_tests {
    ($($name:ident => $scenario:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                assert_eq!(faults::$scenario.name, stringify!($name));
                faults::$scenario.run_on_tansu().await;
            }
        )*
    };
}

tansu_tests! {
    cut_after_processed_produce_in_flight_1 => CUT_IN_FLIGHT_1,
    cut_after_processed_produce_in_flight_5 => CUT_IN_FLIGHT_5,
    repeated_cuts => REPEATED_CUTS,
    delay_below_request_timeout => DELAY_BELOW,
    delay_beyond_request_timeout => DELAY_BEYOND,
    blackhole_forces_request_timeout => BLACKHOLE,
    delivery_timeout_while_blackholed => DELIVERY_TIMEOUT,
    truncated_produce_response => TRUNCATED,
    short_frame_produce_response => SHORT_FRAME,
    bit_flip_in_produce_response => FLIP_PRODUCE,
    bit_flip_in_metadata_response => FLIP_METADATA,
    garbage_size_prefix => GARBAGE_SIZE,
    refused_at_start_then_recovery => REFUSED_AT_START,
    refused_during_run => REFUSED_DURING_RUN,
    cut_during_handshake => CUT_HANDSHAKE,
    close_while_blackholed => CLOSE_BLACKHOLED,
    close_during_cuts => CLOSE_DURING_CUTS,
    zombie_produce_after_its_retry => ZOMBIE_PRODUCE,
}
