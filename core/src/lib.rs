//! kprod-core: a sans-IO Kafka idempotent producer.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod protocol;
