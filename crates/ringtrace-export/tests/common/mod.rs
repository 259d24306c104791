//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use ringtrace_tracing::RingLayer;
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

/// A fresh directory under the system's temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("rtt-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn join(&self, s: &str) -> PathBuf {
        self.0.join(s)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A dispatcher of a registry with `layer` on it.
pub fn dispatch(layer: RingLayer) -> Dispatch {
    Dispatch::new(tracing_subscriber::registry().with(layer))
}
