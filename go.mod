module github.com/omar-selfplay/omar

go 1.26.0

require golang.org/x/term v0.48.0

require (
	github.com/ebitengine/purego v0.11.3 // indirect
	golang.org/x/sys v0.50.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
