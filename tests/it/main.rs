//! Integration tests: each starts the real `sluice` binary and talks to it
//! over HTTP with real signed transactions. Files are named for the
//! behaviour they prove.

#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod support;

mod access_lists_and_uncles;
mod admission_rejections;
mod answered_transactions_survive_kill9;
mod backpressure_txpool_full;
mod block_order_follows_tip_then_arrival;
mod browser_pages_may_call_the_node;
mod calls_are_bounded;
mod calls_take_state_and_block_overrides;
mod cli_and_config;
mod commit_failure_latches;
mod connection_limits;
mod contract_blocks_run_on_lanes;
mod contract_deploy_and_call;
mod crash_kill9_loses_nothing;
mod delegated_senders_get_one_in_flight;
mod durable_restart_resumes;
mod eth_config_names_the_rules;
mod fault_config_and_debug_namespace;
mod fault_each_actor_each_kind;
mod fault_fuzz_fallback;
mod fault_hostile_input_refused;
mod fault_slow_stage_keeps_heights_unique;
mod filters_are_bounded;
mod filters_poll_changes;
mod followers_serve_the_chain;
mod full_nodes_keep_a_window;
mod full_pool_evicts_the_cheapest;
mod future_nonces_wait_for_their_gap;
mod http_is_guarded;
mod idle_chain_seals_empty_blocks;
mod idle_validators_seal_slowly;
mod json_rpc_framing;
mod load_workloads_are_included;
mod mailbox_bounds_hold;
mod otterscan_pages_answer;
mod otterscan_searches_use_the_address_index;
mod overload_sheds_and_recovers;
mod parity_traces_follow_reth;
mod pool_refuses_overdrafts;
mod raw_getters_round_trip;
mod recovery_queue_sheds;
mod replacement_needs_a_price_bump;
mod resources_do_not_halt;
mod rules_are_osaka;
mod send_raw_sync_answers_the_receipt;
mod shutdown_drains_pipeline;
mod simulate_follows_geth;
mod split_network_heals;
mod state_lives_on_disk;
mod state_reads_at_any_block;
mod store_damage_halts_cleanly;
mod traces_follow_geth;
mod transactions_reach_every_validator;
mod transfers_reach_receipts;
mod validator_config_refused;
mod validators_agree_and_rejoin;
mod validators_keep_a_window;
mod websocket_limits_hold;
mod websocket_subscriptions;
mod ws_client;
