use kprod_core::{ProducerConfig, Record};
use kprod_model::broker::{BrokerMode, Cluster};
use kprod_model::sim::{Outcome, Sim};

#[test]
fn happy_path_two_partitions() {
    let mut cluster = Cluster::new(BrokerMode::Lenient, &["b1:9092"]);
    cluster.create_topic("t", 2, 1);
    let mut sim = Sim::new(cluster, ProducerConfig::default());
    for i in 0..100 {
        sim.send(Record::new("t", format!("v{i}")).with_partition(i % 2));
    }
    sim.run(10_000);
    assert!(
        sim.outcomes
            .values()
            .all(|o| matches!(o, Outcome::Delivered { .. })),
        "{:?}",
        sim.outcomes
    );
    sim.check_partition("t", 0);
    sim.check_partition("t", 1);
    assert_eq!(sim.cluster.partition("t", 0).log.len(), 50);
}
