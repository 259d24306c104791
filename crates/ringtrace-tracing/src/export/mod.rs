//! Traces in the formats other tools read. [`chrome`]: Chrome's Trace Event Format
//! (JSON), which `chrome://tracing`, Perfetto's UI (ui.perfetto.dev) and
//! `trace_processor` open. `ringtrace export` runs these.
//!
//! ```
//! # use tracing_subscriber::layer::SubscriberExt;
//! let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).build()?;
//! tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
//!     let _s = tracing::info_span!("work").entered();
//!     tracing::info!(n = 1u64, "step");
//! });
//! let mut dump = Vec::new();
//! recorder.dump_to(&mut dump)?;
//! let trace = ringtrace_tracing::decode::Trace::from_bytes(&dump, "dump".as_ref())?;
//! let mut json = Vec::new();
//! let done = ringtrace_tracing::export::chrome::write(&trace, &mut json)?;
//! assert_eq!((done.events, done.slices), (1, 1));
//! let v: serde_json::Value = serde_json::from_slice(&json)?;
//! assert!(v["traceEvents"].as_array().unwrap().iter().any(|e| e["ph"] == "i" && e["name"] == "step"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod chrome;
