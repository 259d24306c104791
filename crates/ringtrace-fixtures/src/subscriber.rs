//! A `tracing` dispatcher for a test's layer.

use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, Registry};

/// A dispatcher of a registry with `layer` on it.
pub fn dispatch<L: Layer<Registry> + Send + Sync + 'static>(layer: L) -> Dispatch {
    Dispatch::new(tracing_subscriber::registry().with(layer))
}
