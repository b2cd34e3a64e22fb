//! The measurement behind sluice's store-engine choice: the node's per-block
//! write pattern, one atomic, synced write per block, on redb (copy-on-write
//! B-tree) and fjall (LSM tree). Per block of T transfers: the block, its
//! results and its change set (~350 B of incompressible bytes a transfer),
//! T tx-hash index rows (random 32-byte keys), the sender and recipient
//! account records (random 20-byte keys) and one history row each (keyed
//! address ++ block). Recipients are fresh (the state grows by one account
//! a transfer) or random existing accounts of a bulk-loaded state.
//! Printed: commit time per block (median of the first and last tenth),
//! commit throughput, bytes the process wrote per transfer
//! (/proc/self/io), disk use per transfer, a random account read after.
//!
//! ```sh
//! cargo run --release --manifest-path bench/engines/Cargo.toml -- ENGINE DIR INITIAL_ACCOUNTS BLOCKS TXS_PER_BLOCK fresh|existing
//! ```
use rand::{rngs::StdRng, Rng, RngCore, SeedableRng};
use std::time::Instant;

fn write_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes: ").map(|v| v.parse().unwrap()))
        .unwrap()
}
fn du(p: &std::path::Path) -> u64 {
    let mut t = 0;
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        t += if m.is_dir() { du(&e.path()) } else { m.len() };
    }
    t
}
fn addr(i: u64) -> [u8; 20] {
    let mut r = StdRng::seed_from_u64(i ^ 0x5eed);
    let mut a = [0u8; 20];
    r.fill_bytes(&mut a);
    a
}

struct Block {
    n: u64,
    blob: Vec<u8>,
    results: Vec<u8>,
    changes: Vec<u8>,
    txs: Vec<[u8; 32]>,
    accts: Vec<[u8; 20]>,
}

trait Engine {
    fn bulk(&mut self, keys: &[[u8; 20]]);
    fn block(&mut self, b: &Block);
    fn get(&self, k: &[u8; 20]) -> bool;
}

mod r {
    use super::*;
    use redb::{Database, Durability, ReadableDatabase, TableDefinition};
    const BLOCKS: TableDefinition<u64, &[u8]> = TableDefinition::new("blocks");
    const RESULTS: TableDefinition<u64, &[u8]> = TableDefinition::new("results");
    const CHANGES: TableDefinition<u64, &[u8]> = TableDefinition::new("changes");
    const TXS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("txs");
    const ACCTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("accounts");
    const HIST: TableDefinition<&[u8], &[u8]> = TableDefinition::new("history");
    pub struct R(pub Database);
    pub fn open(dir: &std::path::Path) -> R {
        std::fs::create_dir_all(dir).unwrap();
        R(Database::builder().set_cache_size(256 << 20).create(dir.join("db.redb")).unwrap())
    }
    impl Engine for R {
        fn bulk(&mut self, keys: &[[u8; 20]]) {
            for c in keys.chunks(500_000) {
                let mut w = self.0.begin_write().unwrap();
                w.set_durability(Durability::None).unwrap();
                {
                    let mut t = w.open_table(ACCTS).unwrap();
                    for k in c {
                        t.insert(k.as_slice(), [7u8; 72].as_slice()).unwrap();
                    }
                }
                w.commit().unwrap();
            }
        }
        fn block(&mut self, b: &Block) {
            let w = self.0.begin_write().unwrap();
            {
                w.open_table(BLOCKS).unwrap().insert(b.n, b.blob.as_slice()).unwrap();
                w.open_table(RESULTS).unwrap().insert(b.n, b.results.as_slice()).unwrap();
                w.open_table(CHANGES).unwrap().insert(b.n, b.changes.as_slice()).unwrap();
                let mut t = w.open_table(TXS).unwrap();
                for h in &b.txs {
                    t.insert(h.as_slice(), [1u8; 12].as_slice()).unwrap();
                }
                let mut a = w.open_table(ACCTS).unwrap();
                let mut h = w.open_table(HIST).unwrap();
                for k in &b.accts {
                    a.insert(k.as_slice(), [9u8; 72].as_slice()).unwrap();
                    let mut hk = [0u8; 28];
                    hk[..20].copy_from_slice(k);
                    hk[20..].copy_from_slice(&b.n.to_be_bytes());
                    h.insert(hk.as_slice(), [3u8; 72].as_slice()).unwrap();
                }
            }
            w.commit().unwrap();
        }
        fn get(&self, k: &[u8; 20]) -> bool {
            let r = self.0.begin_read().unwrap();
            r.open_table(ACCTS).unwrap().get(k.as_slice()).unwrap().is_some()
        }
    }
}

mod f {
    use super::*;
    use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
    pub struct F {
        db: Database,
        blocks: Keyspace,
        results: Keyspace,
        changes: Keyspace,
        txs: Keyspace,
        accts: Keyspace,
        hist: Keyspace,
    }
    pub fn open(dir: &std::path::Path) -> F {
        let db = Database::builder(dir).cache_size(256 << 20).open().unwrap();
        let ks = |n: &str| db.keyspace(n, KeyspaceCreateOptions::default).unwrap();
        F {
            blocks: ks("blocks"),
            results: ks("results"),
            changes: ks("changes"),
            txs: ks("txs"),
            accts: ks("accounts"),
            hist: ks("history"),
            db,
        }
    }
    impl Engine for F {
        fn bulk(&mut self, keys: &[[u8; 20]]) {
            for c in keys.chunks(500_000) {
                let mut b = self.db.batch();
                for k in c {
                    b.insert(&self.accts, k.as_slice(), [7u8; 72].as_slice());
                }
                b.commit().unwrap();
            }
            self.db.persist(PersistMode::SyncAll).unwrap();
        }
        fn block(&mut self, bl: &Block) {
            let mut b = self.db.batch();
            b.insert(&self.blocks, bl.n.to_be_bytes(), bl.blob.as_slice());
            b.insert(&self.results, bl.n.to_be_bytes(), bl.results.as_slice());
            b.insert(&self.changes, bl.n.to_be_bytes(), bl.changes.as_slice());
            for h in &bl.txs {
                b.insert(&self.txs, h.as_slice(), [1u8; 12].as_slice());
            }
            for k in &bl.accts {
                b.insert(&self.accts, k.as_slice(), [9u8; 72].as_slice());
                let mut hk = [0u8; 28];
                hk[..20].copy_from_slice(k);
                hk[20..].copy_from_slice(&bl.n.to_be_bytes());
                b.insert(&self.hist, hk.as_slice(), [3u8; 72].as_slice());
            }
            b.commit().unwrap();
            self.db.persist(PersistMode::SyncAll).unwrap();
        }
        fn get(&self, k: &[u8; 20]) -> bool {
            self.accts.get(k.as_slice()).unwrap().is_some()
        }
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (engine, dir) = (a[1].as_str(), std::path::PathBuf::from(&a[2]));
    let (initial, blocks, tpb): (u64, u64, usize) =
        (a[3].parse().unwrap(), a[4].parse().unwrap(), a[5].parse().unwrap());
    let fresh = a[6] == "fresh";
    let _ = std::fs::remove_dir_all(&dir);
    let mut e: Box<dyn Engine> = match engine {
        "redb" => Box::new(r::open(&dir)),
        _ => Box::new(f::open(&dir)),
    };
    let t = Instant::now();
    let mut keys: Vec<[u8; 20]> = (0..initial).map(addr).collect();
    keys.sort_unstable();
    e.bulk(&keys);
    drop(keys);
    eprintln!("{engine}: bulk {initial} in {:.1}s, disk {} MiB", t.elapsed().as_secs_f64(), du(&dir) >> 20);
    let mut rng = StdRng::seed_from_u64(1);
    let senders = 10_000u64.min(initial.max(1));
    let mut next_fresh = u64::MAX / 2;
    let w0 = write_bytes();
    let mut times = Vec::new();
    let start = Instant::now();
    for n in 1..=blocks {
        let mut b = Block {
            n,
            blob: vec![0; tpb * 110],
            results: vec![0; tpb * 80],
            changes: vec![0; tpb * 160],
            txs: Vec::with_capacity(tpb),
            accts: Vec::with_capacity(2 * tpb),
        };
        rng.fill_bytes(&mut b.blob);
        for _ in 0..tpb {
            let mut h = [0u8; 32];
            rng.fill_bytes(&mut h);
            b.txs.push(h);
            b.accts.push(addr(rng.gen_range(0..senders)));
            let to = if fresh {
                next_fresh += 1;
                next_fresh
            } else {
                rng.gen_range(0..initial)
            };
            b.accts.push(addr(to));
        }
        b.accts.sort_unstable();
        b.accts.dedup();
        let t = Instant::now();
        e.block(&b);
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let total = start.elapsed().as_secs_f64();
    let wb = write_bytes() - w0;
    let k = (blocks as usize / 10).max(1);
    let med = |s: &[f64]| {
        let mut v = s.to_vec();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let txs = blocks * tpb as u64;
    // random point reads of existing accounts
    let t = Instant::now();
    let mut found = 0;
    let reads = 20_000;
    for _ in 0..reads {
        if e.get(&addr(rng.gen_range(0..initial.max(1)))) {
            found += 1;
        }
    }
    let read_us = t.elapsed().as_secs_f64() * 1e6 / reads as f64;
    println!("{engine} initial={initial} blocks={blocks} tpb={tpb} recipients={}: commit ms first10% median {:.1}, last10% median {:.1}, mean {:.1}; {:.0} tx/s of commit; written {:.1} KB/tx; disk {} MiB ({:.0} B/tx); read {:.1} us ({found}/{reads})",
        a[6], med(&times[..k]), med(&times[times.len() - k..]), total * 1e3 / blocks as f64, txs as f64 / total,
        wb as f64 / txs as f64 / 1e3, du(&dir) >> 20, du(&dir) as f64 / txs as f64, read_us);
}
