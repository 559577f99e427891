//! The controller process under turmoil: fake brokers register and heartbeat over the
//! framed protocol; the controller fences, elects, persists, restarts and reloads.

use crate::support;
use hightide::config::kafka::{BrokerConfig, TopicConfig};
use hightide::history::facts::Facts;
use hightide::kafka::controller::{placement, run, ControllerContext, MetadataView};
use hightide::kafka::protocol::frame::Connection;
use hightide::kafka::protocol::messages::{
    ClusterMetadata, Request, Response, HEARTBEAT_LONG_POLL,
};
use hightide::kafka::types::{Incarnation, ProducerId};
use hightide::os::disk::{Disk, DiskConfig, DiskFault};
use hightide::types::{BrokerId, Epoch, HostName, TopicPartition};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use tokio::time::{sleep, sleep_until, Instant};

const BROKERS: u32 = 3;
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

fn topics() -> Vec<(TopicPartition, Vec<BrokerId>, TopicConfig)> {
    (0..2)
        .map(|p| {
            let tp = TopicPartition::new("orders", p);
            (tp, placement(p, BROKERS, 3), TopicConfig::default())
        })
        .collect()
}

fn start_controller(sim: &mut turmoil::Sim<'_>, disk: Disk, view: MetadataView) {
    sim.host(HostName::Controller.to_string(), move || {
        let ctx = ControllerContext {
            disk: disk.clone(),
            config: BrokerConfig::default(),
            brokers: BROKERS,
            topics: topics(),
            view: view.clone(),
            facts: Facts::default(),
            bugs: Default::default(),
        };
        run(ctx)
    });
}

/// One request over a kept connection, reconnecting after any failure.
async fn request(connection: &mut Option<Connection>, request: &Request) -> Option<Response> {
    if connection.is_none() {
        *connection = Connection::connect(HostName::Controller, CALL_TIMEOUT)
            .await
            .ok();
    }
    let outcome = connection.as_mut()?.call(request, CALL_TIMEOUT).await;
    if outcome.is_err() {
        *connection = None;
    }
    outcome.ok()
}

/// A broker's controller side: register, then heartbeat every 2 s for `heartbeat_for`.
async fn fake_broker(id: u32, heartbeat_for: Duration) -> turmoil::Result {
    let started = Instant::now();
    let broker = BrokerId(id);
    let mut connection = None;
    let register = Request::RegisterBroker {
        broker,
        incarnation: Incarnation(1),
        clean_shutdown: false,
    };
    while !matches!(
        request(&mut connection, &register).await,
        Some(Response::RegisterBroker { error: None })
    ) {
        sleep(Duration::from_millis(200)).await;
    }
    let mut known_version = 0;
    while started.elapsed() < heartbeat_for {
        let heartbeat = Request::BrokerHeartbeat {
            broker,
            incarnation: Incarnation(1),
            known_version,
        };
        if let Some(Response::BrokerHeartbeat {
            metadata: Some(metadata),
            ..
        }) = request(&mut connection, &heartbeat).await
        {
            known_version = metadata.version;
        }
        sleep(Duration::from_millis(2_000)).await;
    }
    Ok(())
}

/// Step the simulation until `until`, publishing simulated time as the world does.
fn step_until(sim: &mut turmoil::Sim<'_>, until: Duration) -> turmoil::Result {
    while sim.elapsed() < until {
        support::step(sim)?;
    }
    Ok(())
}

/// What a client saw at one moment: the image and a fresh producer id.
type Observation = (ClusterMetadata, ProducerId);

async fn observe(connection: &mut Option<Connection>) -> Observation {
    loop {
        let metadata = request(connection, &Request::Metadata).await;
        let allocated = request(connection, &Request::AllocateProducerId).await;
        if let (
            Some(Response::Metadata(metadata)),
            Some(Response::AllocateProducerId { producer_id }),
        ) = (metadata, allocated)
        {
            return (metadata, producer_id);
        }
        sleep(Duration::from_millis(200)).await;
    }
}

/// The controller loses power after fencing broker-3 and comes back from its disk:
/// same leaders, ISRs, epochs and fencing, and producer ids keep increasing.
#[test]
fn controller_restart_reloads_its_metadata_after_a_power_loss() -> turmoil::Result {
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(120))
        .build();
    let disk = Disk::new(DiskConfig::default(), 7);
    let view = MetadataView::default();
    start_controller(&mut sim, disk.clone(), view.clone());
    for id in 1..=BROKERS {
        let heartbeat_for = Duration::from_secs(if id == 3 { 5 } else { 40 });
        sim.client(
            HostName::Broker(id).to_string(),
            fake_broker(id, heartbeat_for),
        );
    }
    let observations: Rc<RefCell<Vec<Observation>>> = Rc::default();
    let seen = observations.clone();
    sim.client(HostName::Reader.to_string(), async move {
        let started = Instant::now();
        let mut connection = None;
        for at in [16, 25, 36] {
            sleep_until(started + Duration::from_secs(at)).await;
            let observation = observe(&mut connection).await;
            seen.borrow_mut().push(observation);
        }
        Ok(())
    });

    step_until(&mut sim, Duration::from_secs(17))?;
    let before_crash = view.get();
    let orders0 = &before_crash.partitions[&TopicPartition::new("orders", 0)];
    assert_eq!(orders0.leader, Some(BrokerId(1)));
    assert_eq!(
        orders0.isr,
        vec![BrokerId(1), BrokerId(2)],
        "broker-3 was fenced"
    );
    assert!(before_crash.brokers[&BrokerId(3)].fenced);
    let orders1 = &before_crash.partitions[&TopicPartition::new("orders", 1)];
    assert_eq!(orders1.leader, Some(BrokerId(2)));

    sim.crash(HostName::Controller.to_string());
    disk.power_loss();
    step_until(&mut sim, Duration::from_secs(18))?;
    sim.bounce(HostName::Controller.to_string());
    sim.run()?;

    let observations = observations.borrow();
    let [first, after_restart, later] = &observations[..] else {
        panic!("expected three observations, got {}", observations.len());
    };
    assert_eq!(first.0, before_crash, "the reader saw the committed image");
    assert_eq!(
        after_restart.0, before_crash,
        "the restarted controller reloaded it"
    );
    // Fresh sessions after the restart: brokers 1 and 2 kept theirs, no election happened.
    assert_eq!(later.0.partitions, before_crash.partitions);
    assert_eq!(
        later.0.partitions[&TopicPartition::new("orders", 0)].leader_epoch,
        Epoch(0)
    );
    assert!(
        first.1 < after_restart.1 && after_restart.1 < later.1,
        "producer ids are unique"
    );
    Ok(())
}

/// The heartbeat long poll: at once when the broker is behind, after
/// `HEARTBEAT_LONG_POLL` when nothing changes, early when the version moves meanwhile.
#[test]
fn heartbeat_is_a_long_poll_on_the_metadata_version() -> turmoil::Result {
    let mut sim = turmoil::Builder::new().build();
    start_controller(
        &mut sim,
        Disk::new(DiskConfig::default(), 1),
        MetadataView::default(),
    );
    sim.client(HostName::Broker(1).to_string(), async {
        let mut connection = None;
        let broker = BrokerId(1);
        let register = Request::RegisterBroker {
            broker,
            incarnation: Incarnation(1),
            clean_shutdown: false,
        };
        while request(&mut connection, &register).await.is_none() {
            sleep(Duration::from_millis(100)).await;
        }
        let heartbeat = |known_version| Request::BrokerHeartbeat {
            broker,
            incarnation: Incarnation(1),
            known_version,
        };

        let started = Instant::now();
        let Some(Response::BrokerHeartbeat {
            fenced: false,
            metadata: Some(metadata),
        }) = request(&mut connection, &heartbeat(0)).await
        else {
            panic!("a broker that is behind gets the image");
        };
        assert!(
            started.elapsed() < HEARTBEAT_LONG_POLL / 2,
            "answered at once"
        );

        let started = Instant::now();
        let held = request(&mut connection, &heartbeat(metadata.version)).await;
        assert!(matches!(
            held,
            Some(Response::BrokerHeartbeat { metadata: None, .. })
        ));
        assert!(
            started.elapsed() >= HEARTBEAT_LONG_POLL,
            "held for the long poll"
        );

        // broker-2 registers 100 ms into the poll: the poll ends with the new image.
        let started = Instant::now();
        let up_to_date = heartbeat(metadata.version);
        let poll = request(&mut connection, &up_to_date);
        let register_other = async {
            sleep(Duration::from_millis(100)).await;
            let mut other = None;
            let register = Request::RegisterBroker {
                broker: BrokerId(2),
                incarnation: Incarnation(1),
                clean_shutdown: false,
            };
            request(&mut other, &register).await
        };
        let (polled, _) = tokio::join!(poll, register_other);
        let Some(Response::BrokerHeartbeat {
            metadata: Some(newer),
            ..
        }) = polled
        else {
            panic!("the poll returns the newer image");
        };
        assert!(newer.brokers.contains_key(&BrokerId(2)));
        assert!(started.elapsed() < HEARTBEAT_LONG_POLL, "returned early");
        Ok(())
    });
    sim.run()
}

/// A leader lost by session timeout is replaced, and the world's view follows.
#[test]
fn a_silent_leader_is_fenced_and_replaced_in_the_view() -> turmoil::Result {
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(60))
        .build();
    let view = MetadataView::default();
    start_controller(&mut sim, Disk::new(DiskConfig::default(), 3), view.clone());
    for id in 1..=BROKERS {
        let heartbeat_for = Duration::from_secs(if id == 1 { 3 } else { 20 });
        sim.client(
            HostName::Broker(id).to_string(),
            fake_broker(id, heartbeat_for),
        );
    }
    step_until(&mut sim, Duration::from_secs(1))?;
    let orders0 = TopicPartition::new("orders", 0);
    assert_eq!(view.get().partitions[&orders0].leader, Some(BrokerId(1)));
    sim.run()?;
    let after = view.get();
    let state = &after.partitions[&orders0];
    assert_eq!(state.leader, Some(BrokerId(2)));
    assert_eq!(state.leader_epoch, Epoch(1));
    assert_eq!(state.isr, vec![BrokerId(2), BrokerId(3)]);
    Ok(())
}

/// A controller that cannot write its metadata halts, as KRaft's does, rather than
/// answer from state that a crash would lose: the producer id is never handed out.
#[test]
fn a_controller_whose_disk_is_full_halts_instead_of_answering() -> turmoil::Result {
    let mut sim = turmoil::Builder::new().build();
    let disk = Disk::new(DiskConfig::default(), 5);
    start_controller(&mut sim, disk.clone(), MetadataView::default());
    sim.client(HostName::Reader.to_string(), async {
        sleep(Duration::from_secs(2)).await;
        let mut connection = None;
        let allocated = request(&mut connection, &Request::AllocateProducerId).await;
        assert!(allocated.is_none(), "answered {allocated:?}");
        Ok(())
    });
    step_until(&mut sim, Duration::from_secs(1))?;
    disk.inject(DiskFault::Full)?;
    sim.run()?;
    assert!(!sim.is_host_running(HostName::Controller.to_string()));
    Ok(())
}
