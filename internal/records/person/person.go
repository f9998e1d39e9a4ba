// Package person holds what a contact is made of, wherever it is sent: a
// contact of its own (service/contact) or inline with a lead
// (service/lead), so that the two handlers share the rules without one
// importing the other.
package person

import "github.com/svat/partnerapi/internal/records/validate"

// Fields are the validated, normalised fields that describe a person: a
// new contact's, or a lead's inline contact's. Nil is not sent.
type Fields struct {
	Email, Phone, FirstName, LastName, CompanyName, JobTitle *string
}

// Check validates a person's fields, prefixing field names with prefix
// (e.g. "contact." for a lead's inline contact), and requires an email or
// a phone, by which the person can be reached.
func Check(v *validate.Errors, prefix string, email, phone, first, last, company, title *string) Fields {
	f := Fields{
		Email:       v.Email(prefix+"email", email),
		Phone:       v.Phone(prefix+"phone", phone),
		FirstName:   v.Text(prefix+"firstName", first, 100),
		LastName:    v.Text(prefix+"lastName", last, 100),
		CompanyName: v.Text(prefix+"companyName", company, 255),
		JobTitle:    v.Text(prefix+"jobTitle", title, 128),
	}
	if f.Email == nil && f.Phone == nil {
		v.Add(prefix+"email", validate.Required, "email or phone is required")
	}
	return f
}
