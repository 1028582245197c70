package variables

// Layered reads a variable from Given first, then from Store, and stores
// generated values in Store: what `bosh int --vars-file … --var … --vars-store
// …` does.
type Layered struct {
	Given Source
	Store Source
	// Where names the sources in errors; "" keeps the director's "config
	// server".
	Where string
}

// Describe implements Described.
func (l Layered) Describe() string {
	if l.Where == "" {
		return configServer
	}
	return l.Where
}

// Get implements Source.
func (l Layered) Get(name string) (any, bool, error) {
	if v, found, err := l.Given.Get(name); err != nil || found {
		return v, found, err
	}
	return l.Store.Get(name)
}

// Put implements Source.
func (l Layered) Put(name string, value any) error { return l.Store.Put(name, value) }
