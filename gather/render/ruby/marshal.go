package ruby

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// The batch reaches Ruby in Ruby's own Marshal format (version 4.8), which
// has a form for every class Psych builds: JSON would turn the Float 1.0
// into the Integer 1, a Bignum into a Float, and has no ±Infinity, NaN or
// Symbol. Marshal.load is also Ruby's fastest way to build the objects, and
// a Map that several specs share (a group's link contents and properties)
// is written once and arrives as one Hash (context.rb never mutates it).
type marshaler struct {
	b       []byte
	symbols map[string]int
	// objects counts what Ruby's loader numbers for back-references:
	// Strings, Floats, Bignums, Arrays and Hashes, in the order they start.
	objects int
	maps    map[*yamlvalue.Map]int
}

func marshalBatch(jobs []Job) ([]byte, error) {
	m := &marshaler{b: []byte{4, 8}, symbols: map[string]int{}, maps: map[*yamlvalue.Map]int{}}
	// [[spec, [[name, source], ...]], ...]
	m.array(len(jobs))
	for _, j := range jobs {
		m.array(2)
		if err := m.value(j.Spec); err != nil {
			return nil, fmt.Errorf("template spec: %w", err)
		}
		m.array(len(j.Templates))
		for _, t := range j.Templates {
			m.array(2)
			m.str(t.Name)
			m.str(t.Source)
		}
	}
	return m.b, nil
}

func (m *marshaler) value(v any) error {
	switch t := v.(type) {
	case nil:
		m.b = append(m.b, '0')
	case bool:
		m.b = append(m.b, "FT"[boolIndex(t)])
	case int:
		m.integer(int64(t))
	case int64:
		m.integer(t)
	case yamlvalue.BigInt:
		i, ok := new(big.Int).SetString(string(t), 10)
		if !ok {
			return fmt.Errorf("invalid integer %q", string(t))
		}
		m.bignum(i)
	case float64:
		m.float(t)
	case string:
		m.str(t)
	case yamlvalue.Symbol:
		m.symbol(string(t))
	case []any:
		m.array(len(t))
		for _, e := range t {
			if err := m.value(e); err != nil {
				return err
			}
		}
	case *yamlvalue.Map:
		if n, ok := m.maps[t]; ok {
			m.b = append(m.b, '@')
			m.long(int64(n))
			return nil
		}
		m.maps[t] = m.objects
		m.hash(t.Len())
		for _, k := range t.Keys() {
			m.str(k)
			e, _ := t.Get(k)
			if err := m.value(e); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
	default:
		return fmt.Errorf("no Ruby form for a %T", v)
	}
	return nil
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// integer writes a Fixnum when it fits in 32 bits, as Ruby itself does
// (Marshal's 'i' holds at most 4 bytes), else a Bignum.
func (m *marshaler) integer(i int64) {
	if i >= math.MinInt32 && i <= math.MaxInt32 {
		m.b = append(m.b, 'i')
		m.long(i)
		return
	}
	m.bignum(big.NewInt(i))
}

// bignum is 'l', the sign, the length in 16-bit words and the magnitude's
// bytes, least significant first.
func (m *marshaler) bignum(i *big.Int) {
	m.objects++
	sign := byte('+')
	if i.Sign() < 0 {
		sign = '-'
	}
	be := new(big.Int).Abs(i).Bytes()
	if len(be)%2 == 1 {
		be = append([]byte{0}, be...)
	}
	m.b = append(m.b, 'l', sign)
	m.long(int64(len(be) / 2))
	for k := len(be) - 1; k >= 0; k-- {
		m.b = append(m.b, be[k])
	}
}

// float is 'f' and the text Ruby's loader reads with strtod, or inf, -inf
// and nan.
func (m *marshaler) float(f float64) {
	m.objects++
	var s string
	switch {
	case math.IsInf(f, 1):
		s = "inf"
	case math.IsInf(f, -1):
		s = "-inf"
	case math.IsNaN(f):
		s = "nan"
	default:
		s = strconv.FormatFloat(f, 'g', -1, 64)
	}
	m.b = append(m.b, 'f')
	m.bytes(s)
}

// str is a UTF-8 String: the raw bytes with the instance variable E = true
// that marks their encoding.
func (m *marshaler) str(s string) {
	m.objects++
	m.b = append(m.b, 'I', '"')
	m.bytes(s)
	m.long(1)
	m.symbol("E")
	m.b = append(m.b, 'T')
}

// symbol is written once; later uses link to it by number. A non-ASCII
// Symbol carries its encoding like a String.
func (m *marshaler) symbol(s string) {
	if n, ok := m.symbols[s]; ok {
		m.b = append(m.b, ';')
		m.long(int64(n))
		return
	}
	m.symbols[s] = len(m.symbols)
	if ascii(s) {
		m.b = append(m.b, ':')
		m.bytes(s)
		return
	}
	m.b = append(m.b, 'I', ':')
	m.bytes(s)
	m.long(1)
	m.symbol("E")
	m.b = append(m.b, 'T')
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func (m *marshaler) array(n int) {
	m.objects++
	m.b = append(m.b, '[')
	m.long(int64(n))
}

func (m *marshaler) hash(n int) {
	m.objects++
	m.b = append(m.b, '{')
	m.long(int64(n))
}

func (m *marshaler) bytes(s string) {
	m.long(int64(len(s)))
	m.b = append(m.b, s...)
}

// long is Marshal's w_long: small values in one byte, others as a byte
// count (negated for negative values) and little-endian bytes.
func (m *marshaler) long(x int64) {
	switch {
	case x == 0:
		m.b = append(m.b, 0)
		return
	case x > 0 && x < 123:
		m.b = append(m.b, byte(x+5))
		return
	case x < 0 && x > -124:
		m.b = append(m.b, byte((x-5)&0xff))
		return
	}
	var buf [8]byte
	for n := 1; n <= 8; n++ {
		buf[n-1] = byte(x & 0xff)
		x >>= 8
		if x == 0 {
			m.b = append(append(m.b, byte(n)), buf[:n]...)
			return
		}
		if x == -1 {
			m.b = append(append(m.b, byte(-n)), buf[:n]...)
			return
		}
	}
}
