"""A desktop notification daemon for tests, run by the system ``python3`` (Debian's
``python3-gi``): it owns ``org.freedesktop.Notifications`` on the session bus named by
``DBUS_SESSION_BUS_ADDRESS``, answers the Notifications interface as a desktop's daemon
does (with introspection), and appends each notification it receives to the file named
by its argument, one JSON object a line; it prints ``ready`` once it owns the name.
"""

import json
import sys

from gi.repository import Gio, GLib

INTERFACE = """<node><interface name="org.freedesktop.Notifications">
<method name="Notify"><arg type="s" direction="in"/><arg type="u" direction="in"/>
<arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="s" direction="in"/>
<arg type="as" direction="in"/><arg type="a{sv}" direction="in"/>
<arg type="i" direction="in"/><arg type="u" direction="out"/></method>
<method name="GetCapabilities"><arg type="as" direction="out"/></method>
<method name="GetServerInformation"><arg type="s" direction="out"/>
<arg type="s" direction="out"/><arg type="s" direction="out"/>
<arg type="s" direction="out"/></method>
<method name="CloseNotification"><arg type="u" direction="in"/></method>
</interface></node>"""


def answer(_conn, _sender, _path, _iface, method, params, invocation):
    if method == "Notify":
        app, _, icon, summary, body, _, _, _ = params.unpack()
        with open(sys.argv[1], "a", encoding="utf-8") as out:
            out.write(json.dumps({"app": app, "icon": icon, "summary": summary,
                                  "body": body}) + "\n")
        invocation.return_value(GLib.Variant("(u)", (1,)))
    elif method == "GetCapabilities":
        invocation.return_value(GLib.Variant("(as)", (["body"],)))
    elif method == "GetServerInformation":
        invocation.return_value(GLib.Variant("(ssss)", ("tests", "zarrfuse", "1", "1.2")))
    else:
        invocation.return_value(None)


def main():
    node = Gio.DBusNodeInfo.new_for_xml(INTERFACE)
    loop = GLib.MainLoop()

    def on_bus(conn, _name):
        conn.register_object("/org/freedesktop/Notifications", node.interfaces[0], answer)

    Gio.bus_own_name(Gio.BusType.SESSION, "org.freedesktop.Notifications",
                     Gio.BusNameOwnerFlags.NONE, on_bus,
                     lambda *_: print("ready", flush=True), lambda *_: loop.quit())
    loop.run()


if __name__ == "__main__":
    main()
