//! How many bytes of annotations one List answer carries. A pod's
//! annotations may reach 256 KiB (Kubernetes' limit, and kubelet copies
//! the pod's into the sandbox's, `last-applied-configuration` among them),
//! so 110 pods could carry 27.5 MiB: past gRPC's 16 MiB, which kubelet
//! enforces, and heavy on the bus on kubelet's relist path. A List carries
//! the smallest sets first, as many as fit the budget; each entry it leaves
//! without them says how many bytes it left out, and the CRI names that in
//! the entry (`ANNOTATIONS_LEFT_OUT`). Status always has them all.

use std::collections::BTreeMap;

/// Annotations (keys and values) one List answer carries at most. With
/// labels (8 KiB a pod at most) for a thousand entries it stays under
/// gRPC's 16 MiB.
pub const ANNOTATIONS_BUDGET: usize = 4 << 20;

/// The annotation the CRI puts, alone, on a listed pod or container whose
/// annotations List left out: how many bytes, and where they are.
pub const ANNOTATIONS_LEFT_OUT: &str = "podscope.io/annotations-left-out";

/// A List entry that carries annotations.
pub trait Annotated {
    fn annotations_mut(&mut self) -> &mut BTreeMap<String, String>;
    fn set_annotations_left_out(&mut self, bytes: u64);
    /// What a caller that is not root sees: none, and that they are hidden.
    fn hide_annotations(&mut self);
}

/// `Annotated` for the List entries, whose fields are named alike.
macro_rules! annotated {
    ($($t:ty),*) => {$(
        impl Annotated for $t {
            fn annotations_mut(&mut self) -> &mut BTreeMap<String, String> {
                &mut self.annotations
            }
            fn set_annotations_left_out(&mut self, bytes: u64) {
                self.annotations_left_out = bytes;
            }
            fn hide_annotations(&mut self) {
                self.annotations_hidden = true;
                self.annotations.clear();
            }
        }
    )*};
}
annotated!(super::SandboxSummary, super::container::ContainerSummary);

/// A List answer as its caller gets it: annotations for root's callers
/// only (they can carry secrets), and within the budget.
pub fn for_caller<T: Annotated>(mut entries: Vec<T>, root: bool) -> Vec<T> {
    if !root {
        entries.iter_mut().for_each(Annotated::hide_annotations);
    }
    fit(&mut entries, ANNOTATIONS_BUDGET);
    entries
}

/// The size of a set as the budget counts it: keys and values.
pub fn size_of(annotations: &BTreeMap<String, String>) -> usize {
    annotations.iter().map(|(k, v)| k.len() + v.len()).sum()
}

/// Keep the annotations of as many entries as fit `budget`, smallest sets
/// first; empty the others and record what each lost. The entries keep
/// their order. Returns the number of entries left without theirs.
pub fn fit<T: Annotated>(entries: &mut [T], budget: usize) -> usize {
    let mut by_size: Vec<(usize, usize)> = entries
        .iter_mut()
        .enumerate()
        .map(|(i, e)| (size_of(e.annotations_mut()), i))
        .collect();
    by_size.sort_unstable();
    let mut left = budget;
    let mut over = 0;
    for (size, i) in by_size {
        if size <= left {
            left -= size;
            continue;
        }
        // Once one does not fit, no larger one does: the rest go too.
        left = 0;
        let e = &mut entries[i];
        e.annotations_mut().clear();
        e.set_annotations_left_out(size as u64);
        over += 1;
    }
    over
}

/// What the CRI shows for a listed entry's annotations: them, or, when
/// List left them out, the one annotation that says so.
pub fn shown(
    annotations: &BTreeMap<String, String>,
    left_out: u64,
    status_call: &str,
) -> std::collections::HashMap<String, String> {
    if left_out > 0 {
        return std::collections::HashMap::from([(
            ANNOTATIONS_LEFT_OUT.to_owned(),
            format!(
                "{left_out} bytes of annotations left out of this list, over its budget of {} MiB for all entries; {status_call} has them",
                ANNOTATIONS_BUDGET >> 20
            ),
        )]);
    }
    annotations
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Entry(BTreeMap<String, String>, u64);

    impl Annotated for Entry {
        fn annotations_mut(&mut self) -> &mut BTreeMap<String, String> {
            &mut self.0
        }
        fn set_annotations_left_out(&mut self, bytes: u64) {
            self.1 = bytes;
        }
        fn hide_annotations(&mut self) {
            self.0.clear();
        }
    }

    fn entry(size: usize) -> Entry {
        Entry(BTreeMap::from([("k".into(), "x".repeat(size - 1))]), 0)
    }

    #[test]
    fn the_smallest_sets_are_kept_the_rest_named() {
        let mut v = vec![entry(60), entry(10), entry(30), entry(40)];
        // 10 + 30 + 40 = 80 fit 90; 60 does not.
        assert_eq!(fit(&mut v, 90), 1);
        assert!(v[0].0.is_empty());
        assert_eq!(v[0].1, 60);
        for e in &v[1..] {
            assert_eq!((e.0.len(), e.1), (1, 0));
        }
        let shown = shown(&v[0].0, v[0].1, "PodSandboxStatus");
        assert_eq!(shown.len(), 1);
        assert!(shown[ANNOTATIONS_LEFT_OUT].starts_with("60 bytes"));
        assert!(shown[ANNOTATIONS_LEFT_OUT].ends_with("PodSandboxStatus has them"));
    }

    #[test]
    fn a_full_node_of_the_largest_annotations_stays_within_grpc() {
        // 110 pods, each at Kubernetes' 256 KiB.
        let mut v: Vec<Entry> = (0..110).map(|_| entry(256 * 1024)).collect();
        let over = fit(&mut v, ANNOTATIONS_BUDGET);
        let carried: usize = v.iter().map(|e| size_of(&e.0)).sum();
        assert!(carried <= ANNOTATIONS_BUDGET);
        assert_eq!(over, 110 - ANNOTATIONS_BUDGET / (256 * 1024));
        assert_eq!(v.iter().filter(|e| e.1 > 0).count(), over);
    }

    #[test]
    fn a_caller_not_root_gets_none_and_nothing_is_left_out() {
        let hidden = for_caller(vec![entry(300), entry(20)], false);
        assert!(hidden.iter().all(|e| e.0.is_empty() && e.1 == 0));
        let shown = for_caller(vec![entry(300), entry(20)], true);
        assert!(shown.iter().all(|e| e.0.len() == 1 && e.1 == 0));
    }

    #[test]
    fn all_fit_when_small() {
        let mut v: Vec<Entry> = (0..110).map(|_| entry(2048)).collect();
        assert_eq!(fit(&mut v, ANNOTATIONS_BUDGET), 0);
        assert!(v.iter().all(|e| e.1 == 0 && !e.0.is_empty()));
    }
}
