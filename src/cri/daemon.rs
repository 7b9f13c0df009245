//! The frontend's one link to podscoped: a system-bus connection made on
//! first use and made again after it breaks (dbus-daemon restarted). The
//! daemon itself restarting needs nothing here: calls go to its bus name,
//! which D-Bus activation brings back.

use super::errors::{connection_lost, status_of};
use crate::api::proxy::{system_connection, ManagerProxy};
use crate::api::Client;
use std::future::Future;
use std::time::Duration;
use tokio::sync::Mutex;
use tonic::Status;

pub struct Daemon {
    client: Mutex<Option<Client>>,
    /// Upper bound for one D-Bus call; a longer wait is DEADLINE_EXCEEDED.
    call_timeout: Duration,
}

impl Daemon {
    pub fn new(call_timeout: Duration) -> Self {
        Daemon {
            client: Mutex::new(None),
            call_timeout,
        }
    }

    async fn client(&self) -> zbus::Result<Client> {
        let mut slot = self.client.lock().await;
        if let Some(p) = slot.as_ref() {
            return Ok(p.clone());
        }
        // Any failure to get a connection reads as one broken (UNAVAILABLE).
        let unavailable = |e: zbus::Error| {
            zbus::Error::InputOutput(std::sync::Arc::new(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                format!("cannot connect to the system bus: {e}"),
            )))
        };
        let conn = system_connection(self.call_timeout)
            .await
            .map_err(unavailable)?;
        // No properties to cache: building the proxy costs no round-trip.
        let p = ManagerProxy::builder(&conn)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(unavailable)?;
        let c = Client::from_proxy(p);
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Run one call to podscoped; a broken connection is dropped so the
    /// next call makes a new one.
    pub async fn call<T, F, Fut>(&self, f: F) -> Result<T, zbus::Error>
    where
        F: FnOnce(Client) -> Fut,
        Fut: Future<Output = zbus::Result<T>>,
    {
        let r = f(self.client().await?).await;
        if let Err(e) = &r {
            if connection_lost(e) {
                tracing::warn!("system bus connection lost ({e}); reconnecting on the next call");
                *self.client.lock().await = None;
            }
        }
        r
    }

    /// `call`, with the error already a gRPC status.
    pub async fn rpc<T, F, Fut>(&self, f: F) -> Result<T, Status>
    where
        F: FnOnce(Client) -> Fut,
        Fut: Future<Output = zbus::Result<T>>,
    {
        self.call(f).await.map_err(|e| status_of(&e))
    }
}
