//! The address index: for each address, the committed transactions it
//! took part in as sender, as the recipient of a call, or as the contract a
//! creation made (internal calls, seen only in traces, are not indexed).
//!
//! One row per (address, block, receipt index), with an empty value:
//! address (20 bytes) ++ block (8, big-endian) ++ receipt index (4,
//! big-endian), so one address's rows are one contiguous, ordered range,
//! read from either end and only as far as one page needs.
//!
//! It is written in the block's own batch, and only while
//! `store.address_index` is on: blocks committed while it was off have no
//! rows, and a search never finds them.

use alloy_primitives::Address;
use fjall::Keyspace;

use crate::{
    tables::{corrupt, db_error},
    StoreError,
};

/// Bytes of one row's key.
pub(crate) const KEY_LEN: usize = 32;

/// The row of `address` in receipt `index` of block `block`.
pub(crate) fn key(address: &Address, block: u64, index: u32) -> [u8; KEY_LEN] {
    let mut k = [0u8; KEY_LEN];
    k[..20].copy_from_slice(address.as_slice());
    k[20..28].copy_from_slice(&block.to_be_bytes());
    k[28..].copy_from_slice(&index.to_be_bytes());
    k
}

/// The block and receipt index a row names.
fn decode(k: &[u8]) -> Result<(u64, u32), StoreError> {
    if k.len() != KEY_LEN {
        return Err(corrupt(format!("address index row of {} bytes", k.len())));
    }
    let mut block = [0u8; 8];
    block.copy_from_slice(&k[20..28]);
    let mut index = [0u8; 4];
    index.copy_from_slice(&k[28..]);
    Ok((u64::from_be_bytes(block), u32::from_be_bytes(index)))
}

/// Which of an address's transactions a search wants, and in which order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressScan {
    /// Those of blocks below this one, newest first (`u64::MAX`: from the
    /// newest indexed).
    Before(u64),
    /// Those of blocks above this one, oldest first.
    After(u64),
}

/// One page of an address's transactions, as the index lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPage {
    /// (block, receipt index) of each, in the search's order.
    pub found: Vec<(u64, u32)>,
    /// Whether the index holds more in that direction past the page.
    pub more: bool,
}

/// The rows of `address` that `scan` asks for: at least `page` of them
/// (at least 1) when there are so many, and then the rest of the last
/// block's, so that a block is never split between two pages (a search
/// goes on from a block number). Reads no further than one row past the
/// page.
pub(crate) fn search(
    ks: &Keyspace,
    address: &Address,
    scan: AddressScan,
    page: usize,
) -> Result<AddressPage, StoreError> {
    let (lo, hi, newest_first) = match scan {
        AddressScan::Before(0) | AddressScan::After(u64::MAX) => return Ok(AddressPage::default()),
        AddressScan::Before(n) => (key(address, 0, 0), key(address, n - 1, u32::MAX), true),
        AddressScan::After(n) => (key(address, n + 1, 0), key(address, u64::MAX, u32::MAX), false),
    };
    let range = ks.range(lo..=hi);
    let rows: Box<dyn Iterator<Item = fjall::Guard>> =
        if newest_first { Box::new(range.rev()) } else { Box::new(range) };
    let page = page.max(1);
    let mut out = AddressPage::default();
    for row in rows {
        let (block, index) = decode(&row.key().map_err(db_error)?)?;
        if out.found.len() >= page && out.found.last().is_some_and(|&(last, _)| last != block) {
            out.more = true;
            break;
        }
        out.found.push((block, index));
    }
    Ok(out)
}
