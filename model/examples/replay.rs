use kprod_core::ConnId;
use kprod_model::model::*;
fn main() {
    use Action::*;
    let c = ConnId;
    let cfg = ModelCfg {
        partitions: 1,
        records_per_partition: 3,
        max_in_flight: 2,
        nodes: 2,
        budget: Budget {
            leader_changes: 1,
            ..Default::default()
        },
        ..Default::default()
    };
    let m = cfg.into_model();
    let actions = vec![
        Send(0),
        Send(0),
        Process(c(0)),
        Deliver(c(0)),
        Process(c(0)),
        Process(c(0)),
        Deliver(c(0)),
        Deliver(c(0)),
        Process(c(1)),
        Deliver(c(1)),
        Process(c(1)),
        Deliver(c(1)),
        LeaderChange(0),
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Process(c(0)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Send(0),
        Process(c(1)),
        Process(c(1)),
        Deliver(c(1)),
        Tick,
        Deliver(c(1)),
        Process(c(1)),
        Tick,
        Deliver(c(1)),
        Deliver(c(0)),
        Process(c(0)),
        Deliver(c(0)),
        Process(c(2)),
        Deliver(c(2)),
    ];
    let mut s = m.init_states().pop().unwrap();
    use stateright::Model;
    for a in actions {
        s = m.next_state(&s, a.clone()).unwrap();
        println!(
            "{a:?}: clock {} wait {:?} links {:?}",
            s.clock_ms,
            s.wait_until_ms,
            s.links
                .iter()
                .map(|(c, l)| (
                    c.0,
                    l.node,
                    l.to_broker
                        .iter()
                        .map(|f| (f.1.api_key, f.1.batches.clone()))
                        .collect::<Vec<_>>(),
                    l.to_client.len()
                ))
                .collect::<Vec<_>>()
        );
    }
    println!("{:#?}", s.producer);
    println!(
        "outcomes {:?} ids {:?} transmits {}",
        s.outcomes, s.ids, s.transmits
    );
}
