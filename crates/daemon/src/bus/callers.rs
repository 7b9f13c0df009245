//! Which callers are still on the bus. A call that may block for long
//! (Wait) must end when its caller hangs up: zbus keeps running a method
//! whose caller is gone, and each such call would hold a task forever.
//!
//! One subscription to the bus driver's NameOwnerChanged serves every
//! waiting call (a match rule per call would soon pass dbus-daemon's limit
//! of rules per connection).

use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use zbus::names::{BusName, UniqueName};
use zbus::Connection;

#[derive(Clone)]
pub struct Callers {
    conn: Connection,
    /// Callers someone waits on; the value turns true when they leave.
    watched: Arc<Mutex<HashMap<String, watch::Sender<bool>>>>,
    /// The bus driver, once the listener runs.
    driver: Arc<tokio::sync::OnceCell<zbus::fdo::DBusProxy<'static>>>,
}

impl Callers {
    pub fn new(conn: &Connection) -> Self {
        Callers {
            conn: conn.clone(),
            watched: Arc::default(),
            driver: Arc::default(),
        }
    }

    /// The bus driver, with the listener started on first use.
    async fn driver(&self) -> zbus::Result<&zbus::fdo::DBusProxy<'static>> {
        self.driver
            .get_or_try_init(|| async {
                let dbus = zbus::fdo::DBusProxy::new(&self.conn).await?;
                let mut changes = dbus.receive_name_owner_changed().await?;
                let watched = self.watched.clone();
                tokio::spawn(async move {
                    while let Some(sig) = changes.next().await {
                        let Ok(args) = sig.args() else { continue };
                        if args.new_owner().is_none() {
                            let gone = args.name().to_string();
                            if let Some(tx) = watched.lock().unwrap().remove(&gone) {
                                let _ = tx.send(true);
                            }
                        }
                    }
                    // The connection is gone: so is every caller.
                    for (_, tx) in watched.lock().unwrap().drain() {
                        let _ = tx.send(true);
                    }
                });
                Ok::<_, zbus::Error>(dbus)
            })
            .await
    }

    /// Resolves when `caller` is no longer connected (at once if it is not
    /// now). On a bus error, never: the call then ends only with its
    /// sandbox, as it would have without this.
    pub async fn gone(&self, caller: &UniqueName<'_>) {
        let Ok(driver) = self.driver().await else {
            return std::future::pending().await;
        };
        let key = caller.to_string();
        let mut rx = {
            let mut w = self.watched.lock().unwrap();
            w.entry(key.clone())
                .or_insert_with(|| watch::channel(false).0)
                .subscribe()
        };
        let _forget = Forget {
            callers: self,
            key: &key,
        };
        // It may have left before the entry existed.
        let still_there = driver
            .name_has_owner(BusName::Unique(caller.to_owned()))
            .await
            .unwrap_or(true);
        if still_there {
            let _ = rx.wait_for(|left| *left).await;
        }
    }
}

/// Drops a caller's entry when its last waiter is done.
struct Forget<'a> {
    callers: &'a Callers,
    key: &'a str,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        let mut w = self.callers.watched.lock().unwrap();
        // This waiter's receiver is still alive here: 1 means it is the last.
        if w.get(self.key).is_some_and(|tx| tx.receiver_count() <= 1) {
            w.remove(self.key);
        }
    }
}
