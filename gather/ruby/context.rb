# bosh-injector's ERB evaluation context: what a BOSH job template sees
# under a director (Bosh::Common::Template::EvaluationContext), reimplemented
# from the behaviour specified in bosh-semantics.md §3.
#
# Protocol: one JSON document on stdin,
#   {"jobs": [{"spec": {...template spec...},
#              "templates": [{"name": "<src>", "source": "<erb>"}, ...]}, ...]}
# and one JSON document on stdout,
#   {"results": [[{"content": "<base64>"} | {"error": "<message>"}, ...], ...]}
# in the same order. Everything a template prints itself goes to stderr.

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

$result_out = STDOUT.dup
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

    def initialize(h)
      @name, @id, @index, @az, @address, @bootstrap = h.values_at("name", "id", "index", "az", "address", "bootstrap")
    end

    private

    # The director never fills in instance properties.
    def property_source
      {}
    end
  end

  class Link
    include PropertyHelpers

    def initialize(name, content)
      @name = name
      @content = content
    end

    def instances
      (@content["instances"] || []).map { |i| Instance.new(i) }
    end

    def properties
      @content["properties"]
    end

    # The group's address. bosh-injector puts the group Service's address in
    # the link content (manual links carry theirs); without one, the BOSH DNS
    # query name is built when the director's inputs are there (§4.5).
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

  class EvaluationContext
    include PropertyHelpers
    attr_reader :spec, :name, :index, :properties, :raw_properties

    def initialize(spec)
      @raw_spec = spec
      @raw_properties = spec["properties"] || {}
      @links = spec["links"] || {}
      @spec = BoshInjector.to_spec(spec)
      @name = spec["name"]
      @index = spec["index"]
      @properties = BoshInjector.to_spec(@raw_properties)
    end

    def get_binding
      binding
    end

    def link(name)
      content = BoshInjector.lookup(@links, name)
      raise UnknownLink.new(name) unless content.is_a?(Hash) && content.key?("instances")
      Link.new(name, content)
    end

    def if_link(name)
      content = BoshInjector.lookup(@links, name)
      return ActiveElseBlock.new(self) unless content.is_a?(Hash) && content.key?("instances")
      yield Link.new(name, content)
      InactiveElseBlock.new
    end

    private

    def property_source
      @raw_properties
    end
  end

  # Renders one template against a fresh deep copy of the spec, so what one
  # template mutates never leaks into the next.
  def self.render(name, source, spec)
    context = EvaluationContext.new(Marshal.load(Marshal.dump(spec)))
    erb = ERB.new(source, trim_mode: "-")
    erb.filename = name
    { "content" => Base64.strict_encode64(erb.result(context.get_binding).b) }
  rescue Exception => e # rubocop:disable Lint/RescueException -- SyntaxError, NotImplementedError included
    raise if e.is_a?(SystemExit) || e.is_a?(Interrupt)

    { "error" => "Error filling in template '#{name}' (line #{line_of(e, name)}: #{message_of(e, name)})" }
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

input = JSON.parse($stdin.read)
results = input.fetch("jobs").map do |job|
  job.fetch("templates").map { |t| BoshInjector.render(t.fetch("name"), t.fetch("source"), job.fetch("spec")) }
end
$result_out.write(JSON.generate({ "results" => results }))
$result_out.flush
