//! Damaged files become errors, not panics.
//!
//! The database returns errors for the damage it finds (a checksum that
//! does not match, a truncated file), but a library may also panic on
//! damage its checks miss (redb, the engine before fjall, did on a damaged
//! allocator state or page type). Opening a data dir, reading a whole one
//! (replay), and every later read, write and close of it run inside
//! [`guarded`]: such a panic becomes
//! [`StoreError::Corrupt`] with the library's message, and the default panic hook
//! stays quiet on that thread meanwhile, so the operator reads one clear
//! error instead of a backtrace. Panics on other threads, and outside
//! [`guarded`], print as they always do.

use std::{
    any::Any,
    cell::Cell,
    panic::{self, AssertUnwindSafe},
    path::Path,
    sync::Once,
};

use crate::StoreError;

thread_local! {
    /// Set while this thread runs inside [`guarded`].
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

static FILTER: Once = Once::new();

/// Runs `f` (which opens or reads the database at `path`); a panic inside
/// it becomes `StoreError::Corrupt` naming the file.
pub fn guarded<T, E: From<StoreError>>(path: &Path, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    // The filter wraps whatever hook is installed when the store is first
    // opened, and defers to it for every panic not raised under a guard.
    FILTER.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !GUARDED.with(Cell::get) {
                previous(info);
            }
        }));
    });
    let outer = GUARDED.with(|g| g.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(outer));
    result.unwrap_or_else(|p| {
        Err(StoreError::Corrupt(format!(
            "{} is damaged ({}); restore the data dir from a backup or start a new one with another --data-dir",
            path.display(),
            message(p.as_ref())
        ))
        .into())
    })
}

fn message(p: &(dyn Any + Send)) -> &str {
    if let Some(s) = p.downcast_ref::<&str>() {
        s
    } else if let Some(s) = p.downcast_ref::<String>() {
        s
    } else {
        "the database library panicked"
    }
}
