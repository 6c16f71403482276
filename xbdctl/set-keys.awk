# xbdctl/set-keys.awk: the keys xbdctl set takes, read from the settings
# table (blkback/settings/options.c, the rows of xbd_settings[] marked
# .runtime = true), as a header for xbdctl's help: the table stays the one
# place a setting is named, and the help cannot miss one.  Reading source
# keeps a cross build from having to run anything it built.
#   awk -f set-keys.awk options.c >set-keys.h
/^const struct setting xbd_settings\[\] = \{/ { intable = 1; next }
intable && /^\};/ { intable = 0; flush(); next }
intable {
	if (match($0, /\{ \.name = "[a-z0-9-]+"/)) {
		flush()
		name = substr($0, RSTART + 11, RLENGTH - 12)
	}
	if (index($0, ".runtime = true"))
		runtime = 1
}
function flush() {
	if (name != "" && runtime)
		keys = keys (keys == "" ? "" : " ") name
	name = ""
	runtime = 0
}
END {
	if (keys == "") {
		print "set-keys.awk: no run-time setting found in the table" > "/dev/stderr"
		exit 1
	}
	print "/* Made by xbdctl/set-keys.awk from blkback/settings/options.c: do not edit. */"
	print "#define XBDCTL_SET_KEYS \"" keys "\""
}
