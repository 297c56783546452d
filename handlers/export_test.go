package handlers

// TestPluginPath is the plugin TestMain built, for the external tests.
var TestPluginPath = func() string { return pluginPath }
