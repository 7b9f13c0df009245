//! The API server, as the node: the node's kubeconfig (server, CA, client
//! certificate and key, embedded as `kubectl config --embed-certs` writes
//! them, which is how make cluster's control-plane.sh makes them), and the
//! three calls the driver makes: its ResourceSlice written and deleted, a
//! ResourceClaim read.

use base64::Engine;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// The parts of a kubeconfig the driver uses.
#[derive(Debug, PartialEq, Eq)]
pub struct Kubeconfig {
    pub server: String,
    pub ca_pem: Vec<u8>,
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

/// The keys read out of a kubeconfig, each the first of its name. A
/// kubeconfig of one cluster and one user (a node's) has each once; a YAML
/// parser would be a dependency for four lines.
const KEYS: [&str; 4] = [
    "server",
    "certificate-authority-data",
    "client-certificate-data",
    "client-key-data",
];

impl Kubeconfig {
    pub fn parse(text: &str) -> Result<Kubeconfig, String> {
        let mut found: [Option<&str>; 4] = [None; 4];
        for line in text.lines() {
            let line = line.trim_start().trim_start_matches("- ");
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            if let Some(i) = KEYS.iter().position(|k| *k == key.trim()) {
                found[i].get_or_insert(value.trim().trim_matches('"'));
            }
        }
        let get = |i: usize| {
            found[i].filter(|v| !v.is_empty()).ok_or_else(|| {
                format!(
                    "no {} in the kubeconfig (one cluster and one user, certificates embedded)",
                    KEYS[i]
                )
            })
        };
        let data = |i: usize| {
            base64::engine::general_purpose::STANDARD
                .decode(get(i)?)
                .map_err(|e| format!("{} in the kubeconfig: {e}", KEYS[i]))
        };
        Ok(Kubeconfig {
            server: get(0)?.trim_end_matches('/').to_string(),
            ca_pem: data(1)?,
            cert_pem: data(2)?,
            key_pem: data(3)?,
        })
    }
}

/// A client of the API server with the node's credentials.
pub struct Api {
    server: String,
    client: reqwest::Client,
}

/// Each call's bound: a test that hangs on the API server says so.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";

impl Api {
    pub fn from_kubeconfig(path: &Path) -> Result<Api, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("read the kubeconfig {}: {e}", path.display()))?;
        let kc = Kubeconfig::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let ca = reqwest::Certificate::from_pem(&kc.ca_pem)
            .map_err(|e| format!("the kubeconfig's CA: {e}"))?;
        let identity = reqwest::Identity::from_pem(&[kc.cert_pem, kc.key_pem].concat())
            .map_err(|e| format!("the kubeconfig's client certificate and key: {e}"))?;
        let client = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca)
            .identity(identity)
            .timeout(CALL_TIMEOUT)
            .build()
            .map_err(|e| format!("an HTTPS client: {e}"))?;
        Ok(Api {
            server: kc.server,
            client,
        })
    }

    /// METHOD PATH with an optional JSON body: the status and the JSON
    /// answer (Null when it is empty or not JSON).
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), String> {
        let what = format!("{method} {path}");
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.server))
            .header("Accept", "application/json");
        if let Some(b) = body {
            req = req
                .header("Content-Type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await.map_err(|e| format!("{what}: {e}"))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| format!("{what}: {e}"))?;
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }

    /// The slice created, or, when one of its name is there (a driver
    /// started again), replaced.
    pub async fn publish_slice(&self, slice: &Value) -> Result<(), String> {
        let (status, answer) = self.call(Method::POST, SLICES, Some(slice)).await?;
        if status.is_success() {
            return Ok(());
        }
        if status != StatusCode::CONFLICT {
            return Err(refused("create the ResourceSlice", status, &answer));
        }
        let name = slice["metadata"]["name"].as_str().unwrap_or_default();
        let path = format!("{SLICES}/{name}");
        let (status, old) = self.call(Method::GET, &path, None).await?;
        if !status.is_success() {
            return Err(refused("read the ResourceSlice", status, &old));
        }
        let mut new = slice.clone();
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
        let (status, answer) = self.call(Method::PUT, &path, Some(&new)).await?;
        if !status.is_success() {
            return Err(refused("replace the ResourceSlice", status, &answer));
        }
        Ok(())
    }

    /// The slice deleted (gone already is fine).
    pub async fn delete_slice(&self, name: &str) -> Result<(), String> {
        let (status, answer) = self
            .call(Method::DELETE, &format!("{SLICES}/{name}"), None)
            .await?;
        if status.is_success() || status == StatusCode::NOT_FOUND {
            Ok(())
        } else {
            Err(refused("delete the ResourceSlice", status, &answer))
        }
    }

    /// A ResourceClaim. Forbidden and NotFound are `Retry`: the Node
    /// authorizer learns that a pod of this node uses the claim from the
    /// pod's status, which its graph may not have seen yet when kubelet
    /// asks for the claim to be prepared.
    pub async fn claim(&self, namespace: &str, name: &str) -> Result<Value, ClaimError> {
        let path = format!("/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}");
        let (status, answer) = self
            .call(Method::GET, &path, None)
            .await
            .map_err(ClaimError::Fatal)?;
        match status {
            s if s.is_success() => Ok(answer),
            StatusCode::FORBIDDEN | StatusCode::NOT_FOUND => Err(ClaimError::Retry(refused(
                &format!("read the ResourceClaim {namespace}/{name}"),
                status,
                &answer,
            ))),
            _ => Err(ClaimError::Fatal(refused(
                &format!("read the ResourceClaim {namespace}/{name}"),
                status,
                &answer,
            ))),
        }
    }
}

pub enum ClaimError {
    Retry(String),
    Fatal(String),
}

/// The API server's refusal, with its own words (a Status object's message).
fn refused(what: &str, status: StatusCode, answer: &Value) -> String {
    format!(
        "{what}: {status}: {}",
        answer["message"].as_str().unwrap_or("(no message)")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As `kubectl config set-cluster/set-credentials --embed-certs` writes it.
    const KUBECONFIG: &str = "apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: Q0EK
    server: https://10.100.0.1:6443
  name: podscope
contexts:
- context:
    cluster: podscope
    user: kubelet-node2
  name: podscope
current-context: podscope
kind: Config
users:
- name: kubelet-node2
  user:
    client-certificate-data: Q0VSVAo=
    client-key-data: S0VZCg==
";

    #[test]
    fn a_kubeconfig_as_kubectl_writes_it() {
        let kc = Kubeconfig::parse(KUBECONFIG).unwrap();
        assert_eq!(kc.server, "https://10.100.0.1:6443");
        assert_eq!(kc.ca_pem, b"CA\n");
        assert_eq!(kc.cert_pem, b"CERT\n");
        assert_eq!(kc.key_pem, b"KEY\n");
    }

    #[test]
    fn a_kubeconfig_without_embedded_certificates_is_named() {
        let files = KUBECONFIG.replace(
            "client-key-data: S0VZCg==",
            "client-key: /etc/kubernetes/pki/node.key",
        );
        let err = Kubeconfig::parse(&files).unwrap_err();
        assert!(err.contains("no client-key-data"), "{err}");
        let bad = KUBECONFIG.replace("Q0VSVAo=", "not base64!");
        let err = Kubeconfig::parse(&bad).unwrap_err();
        assert!(err.contains("client-certificate-data"), "{err}");
    }
}
