//! A list that holds one item without a heap allocation. Almost every prefix of a kernel
//! table has one route with one next hop; two `Vec`s per prefix cost a full table's churn
//! two allocations (and two cache misses) per route added and two frees per route deleted.

use std::ops::{Deref, DerefMut};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Small<T> {
    #[default]
    Empty,
    One(T),
    Many(Vec<T>),
}

impl<T> Small<T> {
    pub fn push(&mut self, item: T) {
        *self = match std::mem::take(self) {
            Small::Empty => Small::One(item),
            Small::One(first) => Small::Many(vec![first, item]),
            Small::Many(mut v) => {
                v.push(item);
                Small::Many(v)
            }
        };
    }

    /// Removes and returns the item at `i` (panics if out of range, as `Vec::remove`).
    pub fn remove(&mut self, i: usize) -> T {
        match std::mem::take(self) {
            Small::Many(mut v) => {
                let item = v.remove(i);
                *self = Small::from(v);
                item
            }
            Small::One(item) if i == 0 => item,
            _ => panic!("index {i} out of range"),
        }
    }

    pub fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        let mut v = Vec::from(std::mem::take(self));
        v.retain(keep);
        *self = Small::from(v);
    }
}

impl<T> FromIterator<T> for Small<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let mut s = Small::Empty;
        for item in items {
            s.push(item);
        }
        s
    }
}

impl<T> From<Vec<T>> for Small<T> {
    fn from(mut v: Vec<T>) -> Self {
        match v.len() {
            0 => Small::Empty,
            1 => Small::One(v.pop().expect("one item")),
            _ => Small::Many(v),
        }
    }
}

impl<T> From<Small<T>> for Vec<T> {
    fn from(s: Small<T>) -> Self {
        match s {
            Small::Empty => Vec::new(),
            Small::One(item) => vec![item],
            Small::Many(v) => v,
        }
    }
}

impl<T: Clone> From<&[T]> for Small<T> {
    fn from(s: &[T]) -> Self {
        match s {
            [] => Small::Empty,
            [one] => Small::One(one.clone()),
            _ => Small::Many(s.to_vec()),
        }
    }
}

impl<T> Deref for Small<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self {
            Small::Empty => &[],
            Small::One(item) => std::slice::from_ref(item),
            Small::Many(v) => v,
        }
    }
}

impl<T> DerefMut for Small<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Small::Empty => &mut [],
            Small::One(item) => std::slice::from_mut(item),
            Small::Many(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Push(u8),
        Remove(usize),
        Retain(u8),
        Set(usize, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            any::<u8>().prop_map(Op::Push),
            (0..4usize).prop_map(Op::Remove),
            any::<u8>().prop_map(Op::Retain),
            (0..4usize, any::<u8>()).prop_map(|(i, x)| Op::Set(i, x))
        ]
    }

    proptest! {
        /// Any sequence of changes leaves the same items as a `Vec`, and one item never
        /// takes the heap.
        #[test]
        fn behaves_as_a_vec(ops in proptest::collection::vec(op(), 0..40)) {
            let (mut s, mut v) = (Small::default(), Vec::new());
            for op in ops {
                match op {
                    Op::Push(x) => {
                        s.push(x);
                        v.push(x);
                    }
                    Op::Remove(i) if i < v.len() => prop_assert_eq!(s.remove(i), v.remove(i)),
                    Op::Remove(_) => {}
                    Op::Retain(m) => {
                        s.retain(|&x| x % 3 != m % 3);
                        v.retain(|&x| x % 3 != m % 3);
                    }
                    Op::Set(i, x) if i < v.len() => {
                        s[i] = x;
                        v[i] = x;
                    }
                    Op::Set(..) => {}
                }
                prop_assert_eq!(&s[..], &v[..]);
                prop_assert_eq!(matches!(s, Small::One(_)), v.len() == 1);
                prop_assert_eq!(Small::from(&v[..]), s.clone());
                prop_assert_eq!(v.iter().copied().collect::<Small<u8>>(), s.clone());
            }
        }
    }
}
