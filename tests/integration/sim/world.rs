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
