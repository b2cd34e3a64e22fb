//! Small containers that avoid a heap allocation in the common case: most
//! locations have one writer, most transactions touch two accounts.

/// A list that keeps its first `N` elements inline and spills the rest to
/// the heap. (Inline slots are `Option`s so that an empty list costs almost
/// nothing to create.)
#[derive(Debug, Clone)]
pub(crate) struct InlineVec<T, const N: usize> {
    inline: [Option<T>; N],
    spill: Vec<T>,
}

impl<T, const N: usize> Default for InlineVec<T, N> {
    fn default() -> Self {
        InlineVec { inline: [const { None }; N], spill: Vec::new() }
    }
}

impl<T, const N: usize> InlineVec<T, N> {
    pub(crate) fn push(&mut self, value: T) {
        match self.inline.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) if self.spill.is_empty() => *slot = Some(value),
            _ => self.spill.push(value),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.inline.iter().all(Option::is_none) && self.spill.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.inline.iter().flatten().count() + self.spill.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.inline.iter().flatten().chain(self.spill.iter())
    }
}

/// Something written by one transaction.
pub(crate) trait ByTx {
    /// The writing transaction's index.
    fn tx(&self) -> u32;
}

/// The versions of one location, sorted by writing transaction, at most one
/// per transaction.
#[derive(Debug, Clone, Default)]
pub(crate) enum Versions<T> {
    #[default]
    Empty,
    One(T),
    Many(Vec<T>),
}

impl<T: ByTx> Versions<T> {
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Versions::Empty => &[],
            Versions::One(v) => std::slice::from_ref(v),
            Versions::Many(v) => v,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// The versions written by transactions before `tx`, newest first.
    pub(crate) fn below(&self, tx: u32) -> impl Iterator<Item = &T> {
        let all = self.as_slice();
        let end = all.partition_point(|v| v.tx() < tx);
        all[..end].iter().rev()
    }

    /// Inserts `value`, replacing the version of the same transaction.
    pub(crate) fn insert(&mut self, value: T) {
        match self {
            Versions::Empty => *self = Versions::One(value),
            Versions::One(old) if old.tx() == value.tx() => *old = value,
            Versions::One(_) => {
                let Versions::One(old) = std::mem::take(self) else {
                    return;
                };
                // Room for the usual few writers at once: growing it later may free a
                // buffer another thread allocated, which glibc makes costly.
                let mut many = Vec::with_capacity(8);
                if old.tx() < value.tx() {
                    many.extend([old, value]);
                } else {
                    many.extend([value, old]);
                }
                *self = Versions::Many(many);
            }
            Versions::Many(many) => {
                let at = many.partition_point(|v| v.tx() < value.tx());
                match many.get_mut(at) {
                    Some(old) if old.tx() == value.tx() => *old = value,
                    _ => many.insert(at, value),
                }
            }
        }
    }

    /// Removes the version written by `tx`, if any.
    pub(crate) fn remove(&mut self, tx: u32) {
        match self {
            Versions::Empty => {}
            Versions::One(old) => {
                if old.tx() == tx {
                    *self = Versions::Empty;
                }
            }
            Versions::Many(many) => {
                let at = many.partition_point(|v| v.tx() < tx);
                if many.get(at).is_some_and(|v| v.tx() == tx) {
                    many.remove(at);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    struct V(u32, u32);
    impl ByTx for V {
        fn tx(&self) -> u32 {
            self.0
        }
    }

    #[test]
    fn versions_stay_sorted_and_unique() {
        let mut v = Versions::default();
        for (tx, val) in [(5, 1), (2, 2), (9, 3), (5, 4), (0, 5)] {
            v.insert(V(tx, val));
        }
        assert_eq!(v.as_slice(), &[V(0, 5), V(2, 2), V(5, 4), V(9, 3)]);
        assert_eq!(v.below(5).copied().collect::<Vec<_>>(), vec![V(2, 2), V(0, 5)]);
        assert_eq!(v.below(0).count(), 0);
        v.remove(2);
        v.remove(7);
        assert_eq!(v.as_slice(), &[V(0, 5), V(5, 4), V(9, 3)]);
        let mut one = Versions::default();
        one.insert(V(3, 1));
        one.remove(4);
        assert_eq!(one.as_slice(), &[V(3, 1)]);
        one.remove(3);
        assert!(one.is_empty());
    }

    #[test]
    fn inline_vec_spills() {
        let mut v: InlineVec<u32, 2> = InlineVec::default();
        for i in 0..5 {
            v.push(i);
        }
        assert!(!v.is_empty());
        assert_eq!(v.iter().copied().collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
    }
}
