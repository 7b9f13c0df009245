//! An object's changed properties in one PropertiesChanged signal.

use std::borrow::Cow;
use std::collections::HashMap;
use zbus::object_server::SignalEmitter;

/// One PropertiesChanged of `iface` carrying every property in `changed`:
/// zbus's generated emitters send a signal per property, seven through the
/// bus for each change of a sandbox, six for a container.
pub(super) async fn properties_changed(
    emitter: &SignalEmitter<'_>,
    iface: zbus::names::InterfaceName<'_>,
    changed: HashMap<&str, zbus::zvariant::Value<'_>>,
) -> zbus::Result<()> {
    zbus::fdo::Properties::properties_changed(emitter, iface, changed, Cow::Borrowed(&[])).await
}
