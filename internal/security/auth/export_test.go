package auth

import "time"

// goLive makes a cache trusted without a database: a listening session
// and a heartbeat that lasts an hour.
func (c *Cache) goLive() {
	c.Trust = time.Hour
	c.init()
	c.reset()
	c.session.Store(1)
	c.proven.Store(c.since())
}
