//! A pod's user namespace (Kubernetes' `hostUsers: false`): the ids its
//! containers' root and users map to on the host, as kubelet allocates
//! them, and the rules a mapping must keep.
//!
//! Every container of the pod gets a user namespace with these mappings,
//! and its root and volumes are idmapped mounts of them: a file owned by
//! root on the node is root's in the container, a process that is root in
//! the container is an unprivileged id on the node.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The fewest ids a pod may be given: an image's files belong to ids up to
/// 65534 (nobody), which must all map. kubelet gives 65536.
pub const MIN_LENGTH: u32 = 65536;

/// `container_id..container_id+length` in the pod is
/// `host_id..host_id+length` on the node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct IdMapping {
    pub container_id: u32,
    pub host_id: u32,
    pub length: u32,
}

impl IdMapping {
    /// The host id `id` of the pod maps to (None: outside the mapping).
    pub fn host_of(&self, id: u32) -> Option<u32> {
        id.checked_sub(self.container_id)
            .filter(|off| *off < self.length)
            .map(|off| self.host_id + off)
    }

    /// `"<container> <host> <length>"`, a line of /proc/PID/uid_map.
    pub fn map_line(&self) -> String {
        format!("{} {} {}", self.container_id, self.host_id, self.length)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserNamespace {
    pub uids: Vec<IdMapping>,
    pub gids: Vec<IdMapping>,
}

impl UserNamespace {
    /// One mapping each, of at least 65536 ids, starting at the pod's root
    /// (0), none of them the node's root, within 32 bits. CRI allows a
    /// list; podscope, like containerd and CRI-O, takes kubelet's one
    /// range (one range is what idmapped mounts of the pod's root need).
    pub fn validate(&self) -> Result<()> {
        for (what, list) in [("uids", &self.uids), ("gids", &self.gids)] {
            let field = format!("user_namespace.{what}");
            let [m] = list.as_slice() else {
                return Err(Error::invalid(
                    &field,
                    format!(
                        "{} mappings: a pod's user namespace takes exactly one",
                        list.len()
                    ),
                ));
            };
            if m.container_id != 0 {
                return Err(Error::invalid(
                    &field,
                    format!(
                        "the mapping starts at id {}: it must map the pod's root, id 0",
                        m.container_id
                    ),
                ));
            }
            if m.length < MIN_LENGTH {
                return Err(Error::invalid(
                    &field,
                    format!(
                        "{} ids, fewer than {MIN_LENGTH} (an image's files belong to ids up to 65534)",
                        m.length
                    ),
                ));
            }
            if m.host_id == 0 {
                return Err(Error::invalid(
                    &field,
                    "the pod's ids would include the node's root (host id 0)",
                ));
            }
            if m.host_id.checked_add(m.length).is_none() {
                return Err(Error::invalid(
                    &field,
                    format!("host ids {}+{} go past 2^32", m.host_id, m.length),
                ));
            }
        }
        Ok(())
    }

    /// The node's ids for the pod's root (uid, gid): the owner of what the
    /// pod's root writes to a container's own upper directory.
    pub fn root_on_host(&self) -> Option<(u32, u32)> {
        let uid = self.uids.first()?.host_of(0)?;
        let gid = self.gids.first()?.host_of(0)?;
        Some((uid, gid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(m: IdMapping) -> UserNamespace {
        UserNamespace {
            uids: vec![m],
            gids: vec![m],
        }
    }

    const KUBELET: IdMapping = IdMapping {
        container_id: 0,
        host_id: 65536 * 3,
        length: 65536,
    };

    #[test]
    fn kubelets_and_critests_mappings_are_taken() {
        ns(KUBELET).validate().unwrap();
        ns(IdMapping {
            container_id: 0,
            host_id: 1000,
            length: 100_000,
        })
        .validate()
        .unwrap();
        assert_eq!(ns(KUBELET).root_on_host(), Some((196608, 196608)));
    }

    #[test]
    fn each_rule_is_named() {
        let bad = |u: UserNamespace, field: &str, words: &str| {
            let e = u.validate().unwrap_err().to_string();
            assert!(e.contains(field) && e.contains(words), "{e}");
        };
        bad(
            UserNamespace {
                uids: vec![KUBELET, KUBELET],
                gids: vec![KUBELET],
            },
            "user_namespace.uids",
            "2 mappings",
        );
        bad(
            UserNamespace {
                uids: vec![KUBELET],
                gids: vec![],
            },
            "user_namespace.gids",
            "0 mappings",
        );
        bad(
            ns(IdMapping {
                container_id: 1,
                ..KUBELET
            }),
            "user_namespace.uids",
            "id 0",
        );
        bad(
            ns(IdMapping {
                length: 1000,
                ..KUBELET
            }),
            "user_namespace.uids",
            "fewer than 65536",
        );
        bad(
            ns(IdMapping {
                host_id: 0,
                ..KUBELET
            }),
            "user_namespace.uids",
            "node's root",
        );
        bad(
            ns(IdMapping {
                host_id: u32::MAX - 10,
                ..KUBELET
            }),
            "user_namespace.uids",
            "2^32",
        );
    }

    #[test]
    fn host_of_maps_within_the_range_only() {
        assert_eq!(KUBELET.host_of(0), Some(196608));
        assert_eq!(KUBELET.host_of(65535), Some(196608 + 65535));
        assert_eq!(KUBELET.host_of(65536), None);
        assert_eq!(KUBELET.map_line(), "0 196608 65536");
    }
}
