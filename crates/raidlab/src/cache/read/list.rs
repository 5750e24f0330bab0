//! Intrusive doubly linked lists over an arena of entries, linked by `u32` slot ids.
//!
//! Every policy keeps its queues (LRU stacks, FIFO queues, ghost histories, frequency buckets)
//! as [`List`]s threaded through the entries of one [`Slab`](super::slab::Slab). A list is
//! only a head, a tail and a length; the links live in the entries, so moving an entry between
//! lists never allocates. By convention the *front* holds the newest (most recently used or
//! inserted) entry and the *back* the next victim.

/// The "no entry" link value.
pub(crate) const NIL: u32 = u32::MAX;

/// Previous/next links of one entry in one list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Link {
    pub prev: u32,
    pub next: u32,
}

impl Link {
    /// An entry that is in no list.
    pub const DETACHED: Link = Link {
        prev: NIL,
        next: NIL,
    };
}

/// Storage whose entries carry a [`Link`]. Implemented for a slice of entries (the entry's
/// primary link) and by wrappers that select a second link of the same entries.
pub(crate) trait Nodes {
    fn link(&self, id: u32) -> Link;
    fn link_mut(&mut self, id: u32) -> &mut Link;
}

/// A doubly linked list of entry ids; front = newest, back = oldest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct List {
    head: u32,
    tail: u32,
    len: u32,
}

impl Default for List {
    fn default() -> Self {
        List::new()
    }
}

impl List {
    pub const fn new() -> Self {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }

    /// Oldest entry: the next victim.
    #[inline(always)]
    pub fn back(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries in the list.
    #[inline(always)]
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Link detached entry `id` at the front.
    #[inline(always)]
    pub fn push_front<N: Nodes + ?Sized>(&mut self, nodes: &mut N, id: u32) {
        debug_assert!(id != NIL);
        let old = self.head;
        *nodes.link_mut(id) = Link {
            prev: NIL,
            next: old,
        };
        if old == NIL {
            self.tail = id;
        } else {
            nodes.link_mut(old).prev = id;
        }
        self.head = id;
        self.len += 1;
    }

    /// Unlink `id`, which must be in this list.
    #[inline(always)]
    pub fn unlink<N: Nodes + ?Sized>(&mut self, nodes: &mut N, id: u32) {
        debug_assert!(self.len > 0);
        let Link { prev, next } = nodes.link(id);
        if prev == NIL {
            debug_assert_eq!(self.head, id);
            self.head = next;
        } else {
            nodes.link_mut(prev).next = next;
        }
        if next == NIL {
            debug_assert_eq!(self.tail, id);
            self.tail = prev;
        } else {
            nodes.link_mut(next).prev = prev;
        }
        *nodes.link_mut(id) = Link::DETACHED;
        self.len -= 1;
    }

    /// Move `id`, which must be in this list, to the front.
    #[inline(always)]
    pub fn move_to_front<N: Nodes + ?Sized>(&mut self, nodes: &mut N, id: u32) {
        if self.head == id {
            return;
        }
        // Not the head, so the list has another entry before it: `prev` and the head exist.
        let Link { prev, next } = nodes.link(id);
        debug_assert!(prev != NIL && self.head != NIL && self.len > 1);
        nodes.link_mut(prev).next = next;
        if next == NIL {
            debug_assert_eq!(self.tail, id);
            self.tail = prev;
        } else {
            nodes.link_mut(next).prev = prev;
        }
        let old = self.head;
        *nodes.link_mut(id) = Link {
            prev: NIL,
            next: old,
        };
        nodes.link_mut(old).prev = id;
        self.head = id;
    }

    /// Unlink and return the back (oldest) entry.
    #[inline(always)]
    pub fn pop_back<N: Nodes + ?Sized>(&mut self, nodes: &mut N) -> Option<u32> {
        let id = self.back()?;
        self.unlink(nodes, id);
        Some(id)
    }

    /// Ids from back (oldest) to front, for tests and invariant checks.
    #[cfg(test)]
    pub fn iter_back<'a, N: Nodes + ?Sized>(&self, nodes: &'a N) -> impl Iterator<Item = u32> + 'a {
        let mut cur = self.tail;
        std::iter::from_fn(move || {
            if cur == NIL {
                None
            } else {
                let id = cur;
                cur = nodes.link(id).prev;
                Some(id)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Plain(Vec<Link>);
    impl Nodes for Plain {
        fn link(&self, id: u32) -> Link {
            self.0[id as usize]
        }
        fn link_mut(&mut self, id: u32) -> &mut Link {
            &mut self.0[id as usize]
        }
    }

    #[test]
    fn push_unlink_move_pop() {
        let mut n = Plain(vec![Link::DETACHED; 4]);
        let mut l = List::new();
        l.push_front(&mut n, 2);
        l.push_front(&mut n, 0);
        l.push_front(&mut n, 1);
        // front 1, 0, 2 back
        assert_eq!(l.iter_back(&n).collect::<Vec<_>>(), vec![2, 0, 1]);
        l.move_to_front(&mut n, 2);
        assert_eq!(l.iter_back(&n).collect::<Vec<_>>(), vec![0, 1, 2]);
        l.unlink(&mut n, 1);
        assert_eq!(l.pop_back(&mut n), Some(0));
        assert_eq!(l.pop_back(&mut n), Some(2));
        assert_eq!(l.pop_back(&mut n), None);
        assert!(l.is_empty());
        assert_eq!(l.back(), None);
    }
}
