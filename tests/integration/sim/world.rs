//! The world alone: hosts that talk over turmoil TCP with `select!` and timers, write and
//! fsync files, and suffer seeded kills and power losses, must produce the same trace hash
//! for the same seed, and different hashes for different seeds.

use hightide::os::clock::SimTime;
use hightide::os::disk::{Disk, DiskConfig, PowerLossModel};
use hightide::sim::world::World;
use hightide::sim::{derive_seed, trace};
use hightide::types::HostName;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turmoil::net::{TcpListener, TcpStream};

const PORT: u16 = 7000;
const HOSTS: u32 = 3;
const TIMEOUT: Duration = Duration::from_millis(200);

async fn ping(peer: HostName, value: u64) -> Option<u64> {
    let attempt = async {
        let mut stream = TcpStream::connect((peer.to_string(), PORT)).await.ok()?;
        stream.write_u64(value).await.ok()?;
        stream.read_u64().await.ok()
    };
    tokio::time::timeout(TIMEOUT, attempt).await.ok().flatten()
}

async fn node(me: u32, disk: Disk, seed: u64) -> turmoil::Result {
    let listener = TcpListener::bind(("0.0.0.0", PORT)).await?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tick = tokio::time::interval(Duration::from_millis(rng.random_range(5..20)));
    let mut sent = 0u64;
    let log = format!("node-{me}/log");
    let recovered = disk.len(&log).unwrap_or(0);
    tracing::info!(recovered, "node started");
    loop {
        tokio::select! {
            biased;
            accepted = listener.accept() => {
                let (mut stream, _) = accepted?;
                tokio::task::spawn_local(async move {
                    if let Ok(v) = stream.read_u64().await {
                        let _ = stream.write_u64(v * 2).await;
                    }
                });
            }
            _ = tick.tick() => {
                sent += 1;
                let peer = HostName::Broker(rng.random_range(1..=HOSTS));
                let reply = ping(peer, sent).await;
                tracing::info!(peer = %peer, sent, ?reply, "ping");
                let _ = disk.append(&log, &sent.to_be_bytes());
                if sent.is_multiple_of(3) {
                    let synced = disk.fsync(&log).await.is_ok() && disk.fsync_dir(&format!("node-{me}")).await.is_ok();
                    tracing::info!(sent, synced, "fsync");
                }
            }
        }
    }
}

fn run(seed: u64) -> u64 {
    let ((), hash) = trace::with_trace(hightide::sim::trace::Print::Nothing, || {
        let mut world = World::new(seed, Duration::from_millis(1), Duration::from_millis(5));
        let config = DiskConfig {
            power_loss: PowerLossModel::RandomWriteback,
            ..DiskConfig::default()
        };
        for n in 1..=HOSTS {
            let host = HostName::Broker(n);
            let disk = Disk::new(config.clone(), derive_seed(seed, &host.to_string()));
            let host_disk = disk.clone();
            let node_seed = derive_seed(seed, &format!("node-{n}"));
            world.add_host(host, Some(disk), move || {
                node(n, host_disk.clone(), node_seed)
            });
        }
        let mut rng = StdRng::seed_from_u64(derive_seed(seed, "faults"));
        for step in 1..=8u64 {
            world
                .run_until(SimTime::from_millis(step * 500))
                .expect("the world runs");
            let victim = HostName::Broker(rng.random_range(1..=HOSTS));
            match rng.random_range(0..3) {
                0 => world.kill(victim),
                1 => world.power_loss(victim),
                _ => world
                    .stopped_hosts()
                    .into_iter()
                    .for_each(|h| world.restart(h)),
            }
        }
        world
            .stopped_hosts()
            .into_iter()
            .for_each(|h| world.restart(h));
        world
            .run_until(SimTime::from_millis(6_000))
            .expect("the world runs");
    });
    assert!(
        hash.events() > 100,
        "the world must do something: {} events",
        hash.events()
    );
    hash.value()
}

#[test]
fn same_seed_same_trace_hash() {
    for seed in [1, 2, 3] {
        assert_eq!(run(seed), run(seed), "seed {seed}");
    }
}

#[test]
fn different_seeds_different_trace_hashes() {
    let hashes: std::collections::BTreeSet<u64> = (1..=5).map(run).collect();
    assert_eq!(hashes.len(), 5);
}

/// `pause`: the host's process runs nothing while the world goes on (no timer fires, no
/// message is read), but its kernel completes a connect to it and buffers the bytes; at
/// `resume` its overdue timer fires at once, at the resume instant, and it reads what was
/// sent to it meanwhile. The other host never stops.
#[test]
fn a_paused_host_runs_nothing_and_catches_up_when_resumed() {
    use hightide::os::clock;
    use std::cell::RefCell;
    use std::rc::Rc;

    let ms = SimTime::from_millis;
    let ticks: Rc<RefCell<Vec<SimTime>>> = Rc::default();
    let reads: Rc<RefCell<Vec<SimTime>>> = Rc::default();
    let other_ticks: Rc<RefCell<Vec<SimTime>>> = Rc::default();
    let mut world = World::new(1, Duration::from_millis(1), Duration::from_millis(1));
    let (t, r) = (ticks.clone(), reads.clone());
    world.add_host(HostName::Broker(1), None, move || {
        let (ticks, reads) = (t.clone(), r.clone());
        async move {
            let listener = TcpListener::bind(("0.0.0.0", PORT)).await?;
            tokio::task::spawn_local(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    if stream.read_u64().await.is_ok() {
                        reads.borrow_mut().push(clock::now());
                    }
                }
            });
            loop {
                tokio::time::sleep(Duration::from_millis(400)).await;
                ticks.borrow_mut().push(clock::now());
            }
        }
    });
    let connected: Rc<RefCell<Vec<SimTime>>> = Rc::default();
    let (o, c0) = (other_ticks.clone(), connected.clone());
    world.add_host(HostName::Broker(2), None, move || {
        let (ticks, c) = (o.clone(), c0.clone());
        async move {
            let connected = c.clone();
            tokio::task::spawn_local(async move {
                tokio::time::sleep(Duration::from_millis(1_000)).await;
                // The paused host's kernel takes the connection and the bytes.
                let peer = (HostName::Broker(1).to_string(), PORT);
                if let Ok(mut stream) = TcpStream::connect(peer).await {
                    connected.borrow_mut().push(clock::now());
                    let _ = stream.write_u64(7).await;
                }
            });
            loop {
                tokio::time::sleep(Duration::from_millis(400)).await;
                ticks.borrow_mut().push(clock::now());
            }
        }
    });
    world.run_until(ms(500)).unwrap();
    world.pause(HostName::Broker(1));
    world.run_until(ms(2_300)).unwrap();
    world.resume(HostName::Broker(1));
    world.run_until(ms(3_000)).unwrap();

    let ticks = ticks.borrow().clone();
    let (before, after): (Vec<SimTime>, Vec<SimTime>) = ticks.iter().partition(|t| **t <= ms(500));
    assert_eq!(before.len(), 1, "one tick before the pause: {ticks:?}");
    assert!(
        after.iter().all(|t| *t >= ms(2_300)),
        "nothing ran while paused: {ticks:?}"
    );
    assert!(
        after[0] <= ms(2_302),
        "the timer due at 0.8 s fires at the resume: {ticks:?}"
    );
    assert_eq!(
        after[1] - after[0],
        Duration::from_millis(400),
        "then its clock goes on from there"
    );
    let connected = connected.borrow().clone();
    assert!(
        connected.len() == 1 && connected[0] <= ms(1_010),
        "a connect to the paused host completes at once, as its kernel accepts it: {connected:?}"
    );
    let reads = reads.borrow().clone();
    assert_eq!(reads.len(), 1);
    assert!(
        reads[0] >= ms(2_300) && reads[0] <= ms(2_310),
        "the message sent at 1 s is read after the resume: {reads:?}"
    );
    assert!(
        other_ticks.borrow().len() == 7,
        "the other host never stopped: {:?}",
        other_ticks.borrow()
    );
}
