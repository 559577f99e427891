//! The run's event trace: what `--trace` prints and what the trace hash digests.
//!
//! Every `tracing` event at INFO or above emitted inside a run is a significant event.
//! The hash is SipHash-1-3 with fixed keys over, per event in order: the simulated time,
//! the host it ran on (turmoil's `node` span), its target and its fields. Two runs of the
//! same scenario and seed must produce the same stream, so the same hash; any divergence
//! in behaviour that reaches an event changes it.

use siphasher::sip::SipHasher13;
use std::fmt::{self, Write as _};
use std::hash::Hasher;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

const KEY_0: u64 = 0x6869_6768_7469_6465; // "hightide"
const KEY_1: u64 = 0x7472_6163_6568_7368; // "traceksh"

/// The digest of a run's significant events; cheap to clone, shared with the layer.
#[derive(Clone)]
pub struct TraceHash {
    state: Arc<Mutex<(SipHasher13, u64)>>,
}

impl Default for TraceHash {
    fn default() -> Self {
        TraceHash { state: Arc::new(Mutex::new((SipHasher13::new_with_keys(KEY_0, KEY_1), 0))) }
    }
}

impl TraceHash {
    /// The hash of the events so far.
    pub fn value(&self) -> u64 {
        self.lock().0.finish()
    }

    /// How many events were hashed.
    pub fn events(&self) -> u64 {
        self.lock().1
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (SipHasher13, u64)> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The host name of a turmoil `node` span, kept in the span's extensions.
struct NodeName(String);

/// Writes formatted field values straight into the hasher: no allocation per event.
struct HashWriter<'a>(&'a mut SipHasher13);

impl fmt::Write for HashWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

struct HashVisitor<'a>(&'a mut SipHasher13);

impl Visit for HashVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.write(field.name().as_bytes());
        let _ = write!(HashWriter(self.0), "={value:?};");
    }
}

/// Formats an event's fields for `--trace`.
struct TextVisitor<'a>(&'a mut String);

impl Visit for TextVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

/// Remembers each `node` span's host name (turmoil opens one around every host's tick).
struct NodeVisitor<'a>(&'a mut Option<String>);

impl Visit for NodeVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "name" {
            *self.0 = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "name" {
            *self.0 = Some(format!("{value:?}").trim_matches('"').to_string());
        }
    }
}

/// The layer that hashes events and, with `print`, writes them to stderr stamped with
/// simulated time and host.
struct TraceLayer {
    hash: TraceHash,
    print: bool,
}

impl<S> Layer<S> for TraceLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        if attrs.metadata().name() != "node" {
            return;
        }
        let mut name = None;
        attrs.record(&mut NodeVisitor(&mut name));
        if let (Some(name), Some(span)) = (name, ctx.span(id)) {
            span.extensions_mut().insert(NodeName(name));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let meta = event.metadata();
        let now = super::clock::now();
        let host = ctx
            .event_scope(event)
            .and_then(|scope| {
                scope.from_root().find_map(|span| {
                    span.extensions().get::<NodeName>().map(|node| node.0.clone())
                })
            })
            .unwrap_or_else(|| "world".to_string());
        {
            let mut state = self.hash.lock();
            let (hasher, count) = &mut *state;
            hasher.write_u128(now.as_nanos());
            hasher.write(host.as_bytes());
            hasher.write(meta.target().as_bytes());
            event.record(&mut HashVisitor(hasher));
            *count += 1;
        }
        if self.print {
            let mut line = format!(
                "{:>10.3}s {:<11} {:<5} {}:",
                now.as_secs_f64(),
                host,
                meta.level(),
                meta.target()
            );
            event.record(&mut TextVisitor(&mut line));
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }
}

/// Runs `f` with a subscriber that hashes this thread's events (and prints them when
/// `print`); returns `f`'s result and the hash. Scoped to the thread, so seeds run in
/// parallel each get their own trace.
pub fn with_trace<T>(print: bool, f: impl FnOnce() -> T) -> (T, TraceHash) {
    let hash = TraceHash::default();
    let layer = TraceLayer { hash: hash.clone(), print }
        .with_filter(tracing_subscriber::filter::LevelFilter::from_level(Level::INFO));
    let subscriber = tracing_subscriber::registry().with(layer);
    let result = tracing::subscriber::with_default(subscriber, f);
    (result, hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emit(values: &[u64]) -> u64 {
        let ((), hash) = with_trace(false, || {
            for v in values {
                tracing::info!(value = v, "event");
            }
        });
        hash.value()
    }

    #[test]
    fn same_events_same_hash() {
        assert_eq!(emit(&[1, 2, 3]), emit(&[1, 2, 3]));
    }

    #[test]
    fn different_or_reordered_events_change_the_hash() {
        assert_ne!(emit(&[1, 2, 3]), emit(&[1, 2, 4]));
        assert_ne!(emit(&[1, 2, 3]), emit(&[2, 1, 3]));
    }

    #[test]
    fn debug_events_are_not_significant() {
        let ((), hash) = with_trace(false, || {
            tracing::info!(value = 1, "event");
            tracing::debug!(value = 2, "detail");
        });
        assert_eq!(hash.value(), emit(&[1]));
        assert_eq!(hash.events(), 1);
    }
}
