# bosh-injector's ERB evaluation context: what a BOSH job template sees
# under a director (Bosh::Common::Template::EvaluationContext), reimplemented
# from the behaviour of the director's own renderer.
#
# Protocol: one Marshal document on stdin (written by marshal.go),
#   [[{...template spec...}, [["<src>", "<erb>"], ...]], ...]
# and frames on descriptor 3 (read by process.go): before each template
# 'S', then its output 'C' or its error 'E', in the same order; 'Z' at the
# end. Everything a template prints itself goes to stderr. The only
# argument is the limit of a template's output in bytes.

require "json"
require "yaml"
require "erb"
require "ostruct"
require "set"
require "shellwords"
require "ipaddr"
require "uri"
require "cgi"
require "base64"
require "openssl"

$result_out = IO.for_fd(3, "wb", autoclose: false)
$result_out.sync = true
$stdout = STDERR

# ActiveSupport's blank?/present?, which templates use without requiring
# anything.
class Object
  def blank?
    respond_to?(:empty?) ? !!empty? : !self
  end

  def present?
    !blank?
  end
end

class String
  def blank?
    /\A[[:space:]]*\z/.match?(self)
  end
end

class Numeric
  def blank?
    false
  end
end

# The director runs json >= 2.9, whose pretty_generate prints empty arrays
# and hashes as [] and {}; older json spreads them over lines. Literal
# newlines only occur between tokens in JSON (strings escape them), so this
# rewrite never touches content.
if (JSON::VERSION.split(".").map(&:to_i) <=> [2, 8]).negative?
  module JSON
    class << self
      alias_method :bosh_injector_pretty_generate, :pretty_generate

      def pretty_generate(obj, opts = nil)
        bosh_injector_pretty_generate(obj, opts).gsub(/\[\n\s*\n\s*\]/, "[]").gsub(/\{\n\s*\}/, "{}")
      end
    end
  end
end

module BoshInjector
  OUTPUT_LIMIT = Integer(ARGV.fetch(0))

  class OutputTooLarge < StandardError
    def initialize
      size = (OUTPUT_LIMIT % (1 << 20)).zero? ? "#{OUTPUT_LIMIT >> 20} MiB" : "#{OUTPUT_LIMIT} bytes"
      super("the rendered output exceeds #{size}, the limit per template")
    end
  end

  # A template's output buffer: a runaway template fails at the line that
  # would take it past the limit, before the text is appended.
  class Output < String
    def <<(text)
      text = text.to_s
      raise OutputTooLarge if bytesize + text.bytesize > OUTPUT_LIMIT

      super(text)
    end
  end

  # ERB writing into an Output.
  class BoundedERB < ERB
    def set_eoutvar(compiler, eoutvar = "_erbout")
      super
      compiler.pre_cmd = ["#{eoutvar} = ::BoshInjector::Output.new"]
    end
  end

  class UnknownProperty < StandardError
    def initialize(names)
      super("Can't find property '#{names.inspect}'")
    end
  end

  class UnknownLink < StandardError
    def initialize(name)
      super("Can't find link '#{name}'")
    end
  end

  # The template spec as nested OpenStructs: unknown keys are nil, and
  # methods(false) lists the attribute names in order, so the idiom
  # spec.networks.send(spec.networks.methods(false).first) works.
  class Spec < OpenStruct
    def methods(regular = true)
      regular ? super : @table.keys
    end
  end

  def self.to_spec(value)
    case value
    when Hash then Spec.new(value.transform_values { |v| to_spec(v) })
    when Array then value.map { |v| to_spec(v) }
    else value
    end
  end

  # What is derived once from a value of the batch and shared by every
  # template rendered against it: the batch's specs are never handed to
  # templates, only copies or frozen views of them, so what one template
  # mutates never reaches the next (the director renders each template
  # against a deep copy of the context). Keyed by identity: the instances of
  # a group share their link contents.
  DUMPS = {}.compare_by_identity
  FROZEN_SPECS = {}.compare_by_identity
  LINK_PARTS = {}.compare_by_identity

  # A fresh deep copy of value, from a Marshal dump taken once.
  def self.copy(value)
    case value
    when nil, true, false, Integer, Float, Symbol then value
    else Marshal.load(DUMPS[value] ||= Marshal.dump(value)) # rubocop:disable Security/MarshalLoad -- our own dump
    end
  end

  # value as nested OpenStructs, built once and frozen: spec.links, which
  # templates read (links' properties go through link().p, which copies).
  def self.frozen_spec(value)
    FROZEN_SPECS[value] ||= deep_freeze(to_spec(value))
  end

  def self.deep_freeze(value)
    case value
    when Spec then value.each_pair { |_, v| deep_freeze(v) }
    when Array then value.each { |v| deep_freeze(v) }
    end
    value.freeze
  end

  # A link's content without its instances (copied per template, it is
  # small) and its instances (shared, read through Instance).
  def self.link_parts(content)
    LINK_PARTS[content] ||= [content.reject { |k, _| k == "instances" }, content["instances"] || []]
  end

  # Dotted lookup as the director's: Hashes are indexed; a String is
  # "not found" (the reference's substring quirk is not reproduced); other
  # values raise as Ruby's [] would.
  def self.lookup(collection, name)
    name.to_s.split(".").reduce(collection) do |node, key|
      case node
      when nil then return nil
      when Hash then node[key]
      when String then return nil
      else raise TypeError, "no implicit conversion of String into Integer"
      end
    end
  end

  module PropertyHelpers
    def p(*args)
      names = Array(args[0])
      names.each do |name|
        value = BoshInjector.lookup(property_source, name)
        return value unless value.nil?
      end
      return args[1] if args.length == 2
      raise UnknownProperty.new(names)
    end

    def if_p(*names)
      values = names.map { |name| BoshInjector.lookup(property_source, name) }
      return ActiveElseBlock.new(self) if values.any?(&:nil?)
      yield(*values)
      InactiveElseBlock.new
    end
  end

  # Returned by if_p/if_link when their block did not run.
  class ActiveElseBlock
    def initialize(target)
      @target = target
    end

    def else
      yield
    end

    def else_if_p(*names, &block)
      @target.if_p(*names, &block)
    end

    def else_if_link(name, &block)
      @target.if_link(name, &block)
    end
  end

  class InactiveElseBlock
    def else; end

    def else_if_p(*_names)
      InactiveElseBlock.new
    end

    def else_if_link(_name)
      InactiveElseBlock.new
    end
  end

  class Instance
    include PropertyHelpers
    attr_reader :name, :id, :index, :az, :address, :bootstrap

    # h is shared by the batch: its Strings are copied.
    def initialize(h)
      @name, @id, @index, @az, @address, @bootstrap = h.values_at("name", "id", "index", "az", "address", "bootstrap").map { |v| v.is_a?(String) ? v.dup : v }
    end

    private

    # The director never fills in instance properties.
    def property_source
      {}
    end
  end

  class Link
    include PropertyHelpers

    # content is the template's copy of the link without its instances,
    # instances the batch's shared list.
    def initialize(name, content, instances)
      @name = name
      @content = content
      @instances = instances
    end

    def instances
      @instances.map { |i| Instance.new(i) }
    end

    def properties
      @content["properties"]
    end

    # The group's address. bosh-injector puts the group Service's address in
    # the link content (manual links carry theirs); without one, the BOSH DNS
    # query name is built when the director's inputs are there.
    def address(criteria = {})
      return subset_address(@content["addresses"], criteria) if @content["addresses"]
      return @content["address"] if @content.key?("address")
      ig, net, dep, domain = @content.values_at("instance_group", "default_network", "deployment_name", "domain")
      raise NotImplementedError, "link.address requires bosh director" unless ig && net && dep && domain

      "q-#{query(criteria)}.#{ig}.#{net}.#{dep}.#{domain}"
    end

    private

    STATUS = { "default" => "s0", "smart" => "s0", "unhealthy" => "s1", "healthy" => "s3", "all" => "s4" }.freeze
    HEALTH_CHECK = { "synchronous" => "y1", "asynchronous" => "y0" }.freeze

    # bosh-injector's link content names a Service for the group, its
    # healthy instances, and with several AZs each AZ's (all or healthy)
    # instances: `by` is {all, healthy, azs: {<az> => {all, healthy}}}.
    def subset_address(by, criteria)
      criteria = criteria.transform_keys(&:to_s)
      status = criteria.fetch("status", "default").to_s
      raise ArgumentError, "link.address: status '#{status}' has no address in bosh-injector; use default, smart, all or healthy" unless %w[default smart all healthy].include?(status)

      key = status == "healthy" ? "healthy" : "all"
      azs = Array(criteria["azs"]).map(&:to_s).uniq
      group_azs = by["azs"].keys
      # A group in one AZ, or criteria naming all of its AZs, is the group.
      return by[key] if azs.empty? || group_azs.empty? || azs.sort == group_azs.sort

      unknown = azs - group_azs
      raise ArgumentError, "link.address: AZs #{unknown} are not the group's AZs #{group_azs}" unless unknown.empty?
      raise ArgumentError, "link.address: azs #{azs} name #{azs.size} of the group's AZs #{group_azs}; bosh-injector addresses one AZ or all of them" if azs.size > 1

      by["azs"][azs.first][key]
    end

    def query(criteria)
      criteria = criteria.transform_keys(&:to_s)
      numbers = @content["az_numbers"] || {}
      tokens = [STATUS.fetch(criteria.fetch("status", "default").to_s)]
      Array(criteria["azs"]).each { |az| tokens << "a#{numbers.fetch(az.to_s)}" }
      tokens << HEALTH_CHECK.fetch(criteria["initial_health_check"].to_s) if criteria.key?("initial_health_check")
      tokens.sort.join
    end

    def property_source
      @content["properties"] || {}
    end
  end

  # What one template sees. The parts it uses are made on first use: a
  # template that never reads spec, properties or a link pays nothing for
  # them, however large.
  class EvaluationContext
    include PropertyHelpers
    attr_reader :name, :index, :raw_properties

    def initialize(spec)
      @shared = spec
      @raw_properties = BoshInjector.copy(spec["properties"]) || {}
      @name = BoshInjector.copy(spec["name"])
      @index = spec["index"]
      @links = spec["links"] || {}
      @link_copies = {}
    end

    # properties and spec are OpenStruct snapshots of the spec as it was
    # when the template started, as the director's (built before it runs):
    # what the template changes in raw_properties or p()'s values does not
    # show in them. Made from their own copies, they share no Strings with
    # raw_properties, which only in-place String edits could tell.
    def properties
      @properties ||= BoshInjector.to_spec(BoshInjector.copy(@shared["properties"]) || {})
    end

    # Links are a frozen view, shared by the batch.
    def spec
      @spec ||= Spec.new(@shared.to_h do |k, v|
        [k, k == "links" ? BoshInjector.frozen_spec(v) : BoshInjector.to_spec(BoshInjector.copy(v))]
      end)
    end

    def get_binding
      binding
    end

    def link(name)
      content = BoshInjector.lookup(@links, name)
      raise UnknownLink.new(name) unless content.is_a?(Hash) && content.key?("instances")
      new_link(name, content)
    end

    def if_link(name)
      content = BoshInjector.lookup(@links, name)
      return ActiveElseBlock.new(self) unless content.is_a?(Hash) && content.key?("instances")
      yield new_link(name, content)
      InactiveElseBlock.new
    end

    private

    # One copy of a link's content per template, as the director's.
    def new_link(name, content)
      rest, instances = BoshInjector.link_parts(content)
      Link.new(name, @link_copies[content.object_id] ||= BoshInjector.copy(rest), instances)
    end

    def property_source
      @raw_properties
    end
  end

  # Compiled once per template source in a batch, into a method of the
  # context: evaluating ERB's Ruby source anew for every instance would parse
  # it again each time.
  ERBS = {}

  # A template reading @spec or @properties itself, not through spec or
  # properties, finds them made before it runs, as the director's does.
  def self.render(name, source, spec)
    compiled, ivars = ERBS[[name, source]] ||=
      [compile(name, source), %w[spec properties].select { |ivar| source.include?("@#{ivar}") }]
    context = EvaluationContext.new(spec)
    ivars.each { |ivar| context.public_send(ivar) }
    content = compiled.is_a?(Symbol) ? context.send(compiled) : compiled.result(context.get_binding)
    ["C", content]
  rescue Exception => e # rubocop:disable Lint/RescueException -- SyntaxError, NotImplementedError included
    raise if e.is_a?(SystemExit) || e.is_a?(Interrupt)

    ["E", "Error filling in template '#{name}' (line #{line_of(e, name)}: #{message_of(e, name)})"]
  end

  def self.frame(tag, data = "")
    $result_out.write(tag, [data.bytesize].pack("Q>"), data)
  end

  # Ruby refuses a class definition or a constant assignment in a method
  # body, which a template may hold (a helper class, as some releases'
  # config templates define): the director evaluates ERB with a binding,
  # where both are allowed, so such a template is evaluated that way, its
  # source parsed again at each render. A template with a true syntax error
  # fails there with Ruby's message, as it would at the director.
  def self.compile(name, source)
    erb = BoundedERB.new(source, trim_mode: "-")
    method = :"bosh_injector_template_#{ERBS.size}"
    begin
      erb.def_method(EvaluationContext, method, name)
      method
    rescue SyntaxError
      erb.filename = name
      erb
    end
  end

  def self.line_of(error, name)
    location = (error.backtrace_locations || []).find { |l| l.path == name }
    return location.lineno if location
    match = error.message.match(/^#{Regexp.escape(name)}:(\d+)/)
    match ? match[1].to_i : "(unknown)"
  end

  def self.message_of(error, name)
    return error.message unless error.is_a?(SyntaxError)
    error.message.sub(/\A#{Regexp.escape(name)}:\d+: /, "").lines.first.to_s.strip
  end
end

input = Marshal.load($stdin.binmode.read) # rubocop:disable Security/MarshalLoad -- written by bosh-injector itself
input.each do |spec, templates|
  templates.each do |name, source|
    BoshInjector.frame("S")
    BoshInjector.frame(*BoshInjector.render(name, source, spec))
  end
end
BoshInjector.frame("Z")
