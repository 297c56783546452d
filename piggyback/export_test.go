package piggyback

// For the external tests, which use a vault (an internal test cannot: the
// vault imports this package).
var (
	Isolate             = isolate
	MountServiceAccount = mountServiceAccount
	WriteFile           = writeFile
	PluginPath          = func() string { return pluginPath }
	SetFlag             = setFlag
)
