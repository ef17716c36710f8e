/work/main/target-wt/release/deps/kprod_core-9361cab3231151ed.d: core/src/lib.rs core/src/config.rs core/src/metrics.rs core/src/partition.rs core/src/partitioner.rs core/src/producer/mod.rs core/src/producer/accumulator.rs core/src/producer/acks.rs core/src/producer/auth.rs core/src/producer/connections.rs core/src/producer/identity.rs core/src/producer/index.rs core/src/producer/metadata.rs core/src/producer/observe.rs core/src/producer/outcomes.rs core/src/producer/pool.rs core/src/producer/requests.rs core/src/producer/responses.rs core/src/protocol/mod.rs core/src/protocol/api_versions.rs core/src/protocol/compression.rs core/src/protocol/error_code.rs core/src/protocol/frame.rs core/src/protocol/header.rs core/src/protocol/init_producer_id.rs core/src/protocol/metadata.rs core/src/protocol/primitives.rs core/src/protocol/produce.rs core/src/protocol/record_batch.rs core/src/protocol/sasl.rs core/src/protocol/versions.rs core/src/sasl.rs core/src/types.rs

/work/main/target-wt/release/deps/libkprod_core-9361cab3231151ed.rlib: core/src/lib.rs core/src/config.rs core/src/metrics.rs core/src/partition.rs core/src/partitioner.rs core/src/producer/mod.rs core/src/producer/accumulator.rs core/src/producer/acks.rs core/src/producer/auth.rs core/src/producer/connections.rs core/src/producer/identity.rs core/src/producer/index.rs core/src/producer/metadata.rs core/src/producer/observe.rs core/src/producer/outcomes.rs core/src/producer/pool.rs core/src/producer/requests.rs core/src/producer/responses.rs core/src/protocol/mod.rs core/src/protocol/api_versions.rs core/src/protocol/compression.rs core/src/protocol/error_code.rs core/src/protocol/frame.rs core/src/protocol/header.rs core/src/protocol/init_producer_id.rs core/src/protocol/metadata.rs core/src/protocol/primitives.rs core/src/protocol/produce.rs core/src/protocol/record_batch.rs core/src/protocol/sasl.rs core/src/protocol/versions.rs core/src/sasl.rs core/src/types.rs

/work/main/target-wt/release/deps/libkprod_core-9361cab3231151ed.rmeta: core/src/lib.rs core/src/config.rs core/src/metrics.rs core/src/partition.rs core/src/partitioner.rs core/src/producer/mod.rs core/src/producer/accumulator.rs core/src/producer/acks.rs core/src/producer/auth.rs core/src/producer/connections.rs core/src/producer/identity.rs core/src/producer/index.rs core/src/producer/metadata.rs core/src/producer/observe.rs core/src/producer/outcomes.rs core/src/producer/pool.rs core/src/producer/requests.rs core/src/producer/responses.rs core/src/protocol/mod.rs core/src/protocol/api_versions.rs core/src/protocol/compression.rs core/src/protocol/error_code.rs core/src/protocol/frame.rs core/src/protocol/header.rs core/src/protocol/init_producer_id.rs core/src/protocol/metadata.rs core/src/protocol/primitives.rs core/src/protocol/produce.rs core/src/protocol/record_batch.rs core/src/protocol/sasl.rs core/src/protocol/versions.rs core/src/sasl.rs core/src/types.rs

core/src/lib.rs:
core/src/config.rs:
core/src/metrics.rs:
core/src/partition.rs:
core/src/partitioner.rs:
core/src/producer/mod.rs:
core/src/producer/accumulator.rs:
core/src/producer/acks.rs:
core/src/producer/auth.rs:
core/src/producer/connections.rs:
core/src/producer/identity.rs:
core/src/producer/index.rs:
core/src/producer/metadata.rs:
core/src/producer/observe.rs:
core/src/producer/outcomes.rs:
core/src/producer/pool.rs:
core/src/producer/requests.rs:
core/src/producer/responses.rs:
core/src/protocol/mod.rs:
core/src/protocol/api_versions.rs:
core/src/protocol/compression.rs:
core/src/protocol/error_code.rs:
core/src/protocol/frame.rs:
core/src/protocol/header.rs:
core/src/protocol/init_producer_id.rs:
core/src/protocol/metadata.rs:
core/src/protocol/primitives.rs:
core/src/protocol/produce.rs:
core/src/protocol/record_batch.rs:
core/src/protocol/sasl.rs:
core/src/protocol/versions.rs:
core/src/sasl.rs:
core/src/types.rs:

# env-dep:CARGO_PKG_VERSION=0.1.0
