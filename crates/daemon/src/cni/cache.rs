//! The attachment cache: one file per pod network attachment under
//! `<state_dir>/networks/<id>.json`, holding everything a later DEL or CHECK
//! needs (the config list as the ADD used it, the args, the runtimeConfig
//! capabilities and the result), so teardown works after the config file
//! changed, after a reboot, and after the sandbox record is gone.
//!
//! An attachment is written *before* ADD (without a result) so that a
//! daemon killed during ADD knows at restart that a DEL is owed.

use podscope_api::domain::SandboxId;
use podscope_api::error::{Error, IoResultExt, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fs;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    pub container_id: String,
    pub ifname: String,
    pub netns: String,
    /// CNI_ARGS.
    pub args: String,
    /// runtimeConfig values by capability name (portMappings, dns, ...).
    pub capability_args: Map<String, Value>,
    /// The network config list, as used by ADD.
    pub config: Value,
    /// ADD's final result; None while ADD has not completed.
    pub result: Option<Value>,
    /// The last teardown failure, kept for the operator.
    #[serde(default)]
    pub last_error: String,
}

pub struct AttachmentStore {
    dir: PathBuf,
}

impl AttachmentStore {
    pub fn open(state_dir: &std::path::Path) -> Result<Self> {
        let dir = state_dir.join("networks");
        crate::state::files::private_dir(&dir).io_context(format!("create {}", dir.display()))?;
        Ok(AttachmentStore { dir })
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    pub fn exists(&self, id: &SandboxId) -> bool {
        self.path(id.as_str()).exists()
    }

    /// Atomic replace (temp file, fsync, rename, fsync dir).
    pub fn save(&self, att: &Attachment) -> Result<()> {
        let path = self.path(&att.container_id);
        let tmp = self.dir.join(format!("{}.json.tmp", att.container_id));
        let ctx = || format!("save network attachment {}", path.display());
        let body = serde_json::to_vec(att).expect("attachments serialize");
        let mut f = crate::state::files::private_file(&tmp).io_context(ctx())?;
        f.write_all(&body)
            .and_then(|_| f.sync_all())
            .io_context(ctx())?;
        fs::rename(&tmp, &path).io_context(ctx())?;
        fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .io_context(ctx())
    }

    pub fn load(&self, id: &SandboxId) -> Result<Option<Attachment>> {
        let path = self.path(id.as_str());
        match fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map(Some).map_err(|e| {
                Error::internal(format!("network attachment {}: {e}", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(format!("read {}", path.display()), e)),
        }
    }

    pub fn delete(&self, id: &SandboxId) -> Result<()> {
        let path = self.path(id.as_str());
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(format!("remove {}", path.display()), e)),
        }
    }

    /// The ids that have an attachment file (unreadable ones included: their
    /// `load` reports why).
    pub fn ids(&self) -> Result<Vec<SandboxId>> {
        let mut ids = Vec::new();
        for e in fs::read_dir(&self.dir).io_context(format!("read {}", self.dir.display()))? {
            let name = e
                .io_context(format!("read {}", self.dir.display()))?
                .file_name();
            let name = name.to_string_lossy();
            if let Some(id) = name.strip_suffix(".json") {
                if let Ok(id) = SandboxId::parse(id) {
                    ids.push(id);
                }
            }
        }
        ids.sort();
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachments_round_trip_and_list() {
        let dir = std::env::temp_dir().join(format!("podscope-att-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let s = AttachmentStore::open(&dir).unwrap();
        let id = SandboxId::random();
        assert_eq!(s.load(&id).unwrap(), None);
        let mut a = Attachment {
            container_id: id.to_string(),
            ifname: "eth0".into(),
            netns: "/run/netns/x".into(),
            args: "IgnoreUnknown=1".into(),
            capability_args: Map::new(),
            config: serde_json::json!({"name": "n"}),
            result: None,
            last_error: String::new(),
        };
        s.save(&a).unwrap();
        a.result = Some(serde_json::json!({"ips": []}));
        s.save(&a).unwrap();
        assert_eq!(s.load(&id).unwrap(), Some(a));
        // Copies of network configs: root's alone.
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.join("networks")), 0o700);
        assert_eq!(mode(&s.path(id.as_str())), 0o600);
        fs::write(dir.join("networks/not-an-id.json"), "{}").unwrap();
        assert_eq!(s.ids().unwrap(), std::slice::from_ref(&id));
        assert!(s.exists(&id));
        s.delete(&id).unwrap();
        s.delete(&id).unwrap();
        assert!(s.ids().unwrap().is_empty());
        let _ = fs::remove_dir_all(&dir);
    }
}
