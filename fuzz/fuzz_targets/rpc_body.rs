//! A whole JSON-RPC request body through the same code the HTTP endpoint
//! runs (`handle_body`): framing, limits, parameters and every method. Must
//! never panic, and every answer must be JSON-RPC.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use sluice_rpc::RpcState;

fn state() -> &'static (Arc<RpcState>, tokio::runtime::Runtime) {
    static STATE: OnceLock<(Arc<RpcState>, tokio::runtime::Runtime)> = OnceLock::new();
    STATE.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
        (sluice_fuzz::offline_state(), rt)
    })
}

fuzz_target!(|data: &[u8]| {
    let (state, rt) = state();
    if let Some(answer) = rt.block_on(sluice_rpc::framing::handle_body(state, data)) {
        let v: serde_json::Value = serde_json::from_slice(&answer).expect("the answer is JSON");
        let first = match &v {
            serde_json::Value::Array(items) => items.first().cloned().unwrap_or_default(),
            one => one.clone(),
        };
        assert_eq!(first["jsonrpc"], "2.0");
    }
});
