package db

import (
	"encoding/hex"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// uuidCodec is pgx's uuid codec taught github.com/google/uuid, the type of
// every id in the generated queries. Without it pgx encodes a uuid.UUID
// through driver.Valuer (formatted as text, parsed back by PostgreSQL) and
// scans one through sql.Scanner (a text value parsed by the uuid package):
// a tenth of the CPU of a page of contacts. With it a uuid is 16 bytes
// each way.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(uuid.UUID); ok {
		if format == pgtype.BinaryFormatCode {
			return encodeUUIDBinary{}
		}
		return encodeUUIDText{}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok {
		if format == pgtype.BinaryFormatCode {
			return scanUUIDBinary{}
		}
		return scanUUIDText{}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type encodeUUIDBinary struct{}

func (encodeUUIDBinary) Encode(value any, buf []byte) ([]byte, error) {
	id := value.(uuid.UUID)
	return append(buf, id[:]...), nil
}

type encodeUUIDText struct{}

func (encodeUUIDText) Encode(value any, buf []byte) ([]byte, error) {
	id := value.(uuid.UUID)
	var s [36]byte
	hex.Encode(s[0:8], id[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], id[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], id[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], id[8:10])
	s[23] = '-'
	hex.Encode(s[24:], id[10:])
	return append(buf, s[:]...), nil
}

var errNullUUID = errors.New("db: cannot scan NULL into a uuid.UUID")

type scanUUIDBinary struct{}

func (scanUUIDBinary) Scan(src []byte, dst any) error {
	if src == nil {
		return errNullUUID
	}
	if len(src) != 16 {
		return errors.New("db: a binary uuid is 16 bytes")
	}
	copy(dst.(*uuid.UUID)[:], src)
	return nil
}

type scanUUIDText struct{}

func (scanUUIDText) Scan(src []byte, dst any) error {
	if src == nil {
		return errNullUUID
	}
	id, err := uuid.ParseBytes(src)
	if err != nil {
		return err
	}
	*dst.(*uuid.UUID) = id
	return nil
}

// registerCodecs installs uuidCodec for uuid and uuid[], and the scans of
// nullable columns into pointers, on a connection's type map.
func registerCodecs(m *pgtype.Map) {
	t := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}}
	m.RegisterType(t)
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: t}})
	m.TryWrapScanPlanFuncs = append([]pgtype.TryWrapScanPlanFunc{tryWrapNullable}, m.TryWrapScanPlanFuncs...)
}

// nullableScan scans a column that may be NULL into a pointer field
// (*string for a nullable text column, as sqlc generates them): nil for
// NULL, else a new value scanned by the plan for T. pgx does the same by
// reflection for any pointer, which was an eighth of the CPU of a page of
// contacts (five nullable columns a row).
type nullableScan[T any] struct{ next pgtype.ScanPlan }

func (p *nullableScan[T]) SetNext(next pgtype.ScanPlan) { p.next = next }

func (p *nullableScan[T]) Scan(src []byte, dst any) error {
	ptr := dst.(**T)
	if src == nil {
		*ptr = nil
		return nil
	}
	v := new(T)
	if err := p.next.Scan(src, v); err != nil {
		return err
	}
	*ptr = v
	return nil
}

// tryWrapNullable is a pgtype.TryWrapScanPlanFunc for the pointer types of
// the generated rows.
func tryWrapNullable(target any) (plan pgtype.WrappedScanPlanNextSetter, next any, ok bool) {
	switch target.(type) {
	case **string:
		return &nullableScan[string]{}, new(string), true
	case **int64:
		return &nullableScan[int64]{}, new(int64), true
	case **int32:
		return &nullableScan[int32]{}, new(int32), true
	case **time.Time:
		return &nullableScan[time.Time]{}, new(time.Time), true
	case **uuid.UUID:
		return &nullableScan[uuid.UUID]{}, new(uuid.UUID), true
	}
	return nil, nil, false
}
