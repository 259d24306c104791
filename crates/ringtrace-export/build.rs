//! With the `perfetto` feature, generates the Perfetto message types from
//! `proto/perfetto_trace.proto`: protox parses the schema (in Rust, no `protoc` needed)
//! and prost-build writes the types into `OUT_DIR`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/perfetto_trace.proto");
    #[cfg(feature = "perfetto")]
    {
        let fds = protox::compile(["proto/perfetto_trace.proto"], ["proto"])?;
        prost_build::Config::new().compile_fds(fds)?;
    }
    Ok(())
}
