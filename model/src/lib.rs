//! kprod-model: the real `kprod_core::Producer` against a Kafka broker model.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod broker;
pub mod model;
pub mod sim;
