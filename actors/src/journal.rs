//! The pending-transaction journal: an append-only file in the data dir
//! holding every transaction the node answered a client with a hash, so a
//! kill (SIGKILL, power loss) between the answer and the block that
//! includes it loses nothing; the node offers them again at its next start.
//!
//! A record is `len: u32 LE | check: 8 bytes | body`, the body being
//! `sender: 20 bytes | nonce: u64 LE | raw transaction`, and `check` the
//! first 8 bytes of the body's keccak. The sender and nonce are stored so
//! that compaction can tell a committed transaction from a pending one with
//! one state read, without recovering the sender again (~40 us each).
//!
//! A kill during a write leaves a torn last record: reading stops at the
//! first record that is short or fails its check, and opening truncates the
//! file there, so later appends are never hidden behind it.
//!
//! This is the plain engine (no threads, no actors); the group-commit
//! writer thread is [`crate::journal_writer`].

use std::{
    fs::{File, OpenOptions},
    io::{self, Read, Write},
    path::{Path, PathBuf},
};

use alloy_primitives::{keccak256, Address, Bytes};

/// Bytes before each record's body: its length and its check.
const HEADER: usize = 4 + 8;
/// Bytes of a body before the raw transaction: sender and nonce.
const BODY_PREFIX: usize = 20 + 8;
/// The largest body read back: a larger length is damage, not a record
/// (raw transactions are bounded far below this by admission).
const MAX_BODY: usize = 16 << 20;

/// One journaled transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its recovered sender.
    pub sender: Address,
    /// Its nonce.
    pub nonce: u64,
    /// The exact bytes the client sent.
    pub raw: Bytes,
}

impl Entry {
    /// The record's size in the file.
    pub fn record_len(&self) -> usize {
        HEADER + BODY_PREFIX + self.raw.len()
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        let body_len = BODY_PREFIX + self.raw.len();
        let start = out.len() + HEADER;
        out.extend_from_slice(&(body_len as u32).to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(self.sender.as_slice());
        out.extend_from_slice(&self.nonce.to_le_bytes());
        out.extend_from_slice(&self.raw);
        let check = keccak256(&out[start..]);
        out[start - 8..start].copy_from_slice(&check[..8]);
    }
}

/// An open journal file, positioned at its end.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    len: u64,
}

impl Journal {
    /// Opens (or creates) the journal at `path`: the records it holds, in
    /// the order they were written, and the journal. A torn or damaged
    /// tail is cut off (and logged): what follows it could not be read.
    pub fn open(path: &Path) -> io::Result<(Journal, Vec<Entry>)> {
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let (entries, valid) = decode(&bytes);
        if valid < bytes.len() {
            tracing::warn!(
                path = %path.display(),
                kept = entries.len(),
                cut_bytes = bytes.len() - valid,
                "the transaction journal ends in a torn record (a kill during a write): cut off"
            );
            file.set_len(valid as u64)?;
            file.sync_all()?;
        }
        Ok((Journal { path: path.to_path_buf(), file, len: valid as u64 }, entries))
    }

    /// The file's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the journal holds no record.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `entries` and waits for them to reach the disk
    /// (`fdatasync`), once for all of them. On failure the file is cut
    /// back to where it was, so a half-written batch does not hide the
    /// records appended after it.
    pub fn append<'a>(&mut self, entries: impl IntoIterator<Item = &'a Entry>) -> io::Result<()> {
        let mut buf = Vec::new();
        for e in entries {
            e.encode_into(&mut buf);
        }
        if buf.is_empty() {
            return Ok(());
        }
        let written = self.file.write_all(&buf).and_then(|()| self.file.sync_data());
        match written {
            Ok(()) => {
                self.len += buf.len() as u64;
                Ok(())
            }
            Err(e) => {
                let _ = self.file.set_len(self.len);
                Err(e)
            }
        }
    }

    /// Rewrites the journal keeping only the records `keep` keeps, in
    /// order, atomically: a temporary file is written and synced, then
    /// renamed over the journal and the directory synced, so a kill at any
    /// point leaves either the old journal or the new one. How many records
    /// were kept and dropped.
    pub fn rewrite(&mut self, mut keep: impl FnMut(&Entry) -> bool) -> io::Result<(usize, usize)> {
        let bytes = std::fs::read(&self.path)?;
        let (entries, _) = decode(&bytes);
        let total = entries.len();
        let kept: Vec<Entry> = entries.into_iter().filter(|e| keep(e)).collect();
        let tmp = self.path.with_extension("tmp");
        {
            let mut out = File::create(&tmp)?;
            let mut buf = Vec::new();
            for e in &kept {
                e.encode_into(&mut buf);
            }
            out.write_all(&buf)?;
            out.sync_all()?;
        }
        std::fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)?.sync_all()?;
        }
        self.file = OpenOptions::new().read(true).append(true).open(&self.path)?;
        self.len = self.file.metadata()?.len();
        Ok((kept.len(), total - kept.len()))
    }
}

/// The records at the start of `bytes` that are whole and pass their
/// check, and how many bytes they take.
fn decode(bytes: &[u8]) -> (Vec<Entry>, usize) {
    let mut entries = Vec::new();
    let mut at = 0;
    while let Some((entry, next)) = decode_one(bytes, at) {
        entries.push(entry);
        at = next;
    }
    (entries, at)
}

/// The record at `at` and where the next one starts, or `None` at the end
/// or at a torn or damaged record.
fn decode_one(bytes: &[u8], at: usize) -> Option<(Entry, usize)> {
    let header = bytes.get(at..at.checked_add(HEADER)?)?;
    let body_len = u32::from_le_bytes(header[..4].try_into().ok()?) as usize;
    if !(BODY_PREFIX..=MAX_BODY).contains(&body_len) {
        return None;
    }
    let start = at + HEADER;
    let body = bytes.get(start..start + body_len)?;
    if keccak256(body)[..8] != header[4..] {
        return None;
    }
    let sender = Address::from_slice(&body[..20]);
    let nonce = u64::from_le_bytes(body[20..28].try_into().ok()?);
    let raw = Bytes::copy_from_slice(&body[BODY_PREFIX..]);
    Some((Entry { sender, nonce, raw }, start + body_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: u8) -> Entry {
        Entry {
            sender: Address::repeat_byte(i % 3),
            nonce: u64::from(i),
            raw: Bytes::from(vec![i; 50 + i as usize]),
        }
    }

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sluice-journal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("txjournal")
    }

    #[test]
    fn appended_batches_replay_in_order() {
        let path = temp("round-trip");
        let all: Vec<Entry> = (0..10).map(entry).collect();
        {
            let (mut j, replayed) = Journal::open(&path).unwrap();
            assert!(replayed.is_empty() && j.is_empty());
            j.append(&all[..4]).unwrap();
            j.append(&all[4..]).unwrap();
            let expected: usize = all.iter().map(Entry::record_len).sum();
            assert_eq!(j.len(), expected as u64);
        }
        let (j, replayed) = Journal::open(&path).unwrap();
        assert_eq!(replayed, all);
        assert_eq!(j.len(), std::fs::metadata(&path).unwrap().len());
    }

    /// A kill in the middle of a write: the torn record is ignored, the
    /// rest replayed, and what is appended afterwards is readable.
    #[test]
    fn a_torn_last_record_is_ignored_and_cut_off() {
        let path = temp("torn");
        let all: Vec<Entry> = (0..5).map(entry).collect();
        Journal::open(&path).unwrap().0.append(&all).unwrap();
        let full = std::fs::metadata(&path).unwrap().len();
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(full - 3).unwrap();
        drop(file);
        let (mut j, replayed) = Journal::open(&path).unwrap();
        assert_eq!(replayed, all[..4]);
        assert_eq!(j.len(), full - all[4].record_len() as u64, "the torn tail is cut off");
        j.append([&entry(9)]).unwrap();
        let (_, replayed) = Journal::open(&path).unwrap();
        assert_eq!(replayed.len(), 5);
        assert_eq!(replayed[4], entry(9), "an append after a torn tail is read back");
    }

    /// A record whose bytes changed fails its check: it and what follows
    /// are not offered (they could be anything).
    #[test]
    fn a_damaged_record_ends_the_replay() {
        let path = temp("damaged");
        let all: Vec<Entry> = (0..3).map(entry).collect();
        Journal::open(&path).unwrap().0.append(&all).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let second = all[0].record_len() + HEADER + 30;
        bytes[second] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(Journal::open(&path).unwrap().1, all[..1]);
    }

    #[test]
    fn rewrite_keeps_only_what_the_filter_keeps() {
        let path = temp("rewrite");
        let all: Vec<Entry> = (0..10).map(entry).collect();
        let (mut j, _) = Journal::open(&path).unwrap();
        j.append(&all).unwrap();
        let (kept, dropped) = j.rewrite(|e| e.nonce % 2 == 0).unwrap();
        assert_eq!((kept, dropped), (5, 5));
        let evens: Vec<Entry> = all.iter().filter(|e| e.nonce % 2 == 0).cloned().collect();
        let expected: usize = evens.iter().map(Entry::record_len).sum();
        assert_eq!(j.len(), expected as u64);
        j.append([&entry(11)]).unwrap();
        let (_, replayed) = Journal::open(&path).unwrap();
        assert_eq!(replayed[..5], evens[..]);
        assert_eq!(replayed[5], entry(11), "appends after a rewrite go to the new file");
        assert!(!path.with_extension("tmp").exists());
    }
}
